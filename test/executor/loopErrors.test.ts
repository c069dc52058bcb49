/**
 * A deadlock with a client's transaction is retried by the executor's loops and logged as a
 * warning naming the statement; other failures stay errors. The deadlock is a real one,
 * produced by two sessions on the real database.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { namingStatement, statementOf } from '../../src/errors.js';
import { logRetriedFailure } from '../../src/executor/loopErrors.js';
import { createTestSchema, onCleanup } from '../helpers/db.js';

function capture(): { log: pino.Logger; lines: Record<string, any>[] } {
  const lines: Record<string, any>[] = [];
  const sink = new Writable({ write(chunk, _enc, cb) { lines.push(JSON.parse(chunk.toString())); cb(); } });
  return { log: pino({ level: 'info' }, sink), lines };
}

/** Two sessions lock two rows in opposite orders: PostgreSQL picks one as the deadlock's victim and returns its error. */
async function realDeadlock(url: string, table: string): Promise<unknown> {
  const a = new pg.Client({ connectionString: url });
  const b = new pg.Client({ connectionString: url });
  await a.connect();
  await b.connect();
  onCleanup(async () => { await a.end(); await b.end(); });
  await a.query('BEGIN');
  await b.query('BEGIN');
  await a.query(`UPDATE ${table} SET n = n + 1 WHERE id = 1`);
  await b.query(`UPDATE ${table} SET n = n + 1 WHERE id = 2`);
  const results = await Promise.allSettled([
    namingStatement('claimReadySteps', () => a.query(`UPDATE ${table} SET n = n + 1 WHERE id = 2`)),
    namingStatement('claimReadySteps', () => b.query(`UPDATE ${table} SET n = n + 1 WHERE id = 1`)),
  ]);
  await a.query('ROLLBACK');
  await b.query('ROLLBACK');
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (!failed) throw new Error('no deadlock');
  return failed.reason;
}

describe('failures the executor retries', () => {
  it('logs a deadlock with a client at warn, naming the statement and the code', async () => {
    const t = await createTestSchema();
    await t.q(`CREATE TABLE ${t.schema}.pair (id int PRIMARY KEY, n int NOT NULL DEFAULT 0)`);
    await t.q(`INSERT INTO ${t.schema}.pair (id) VALUES (1), (2)`);
    const err = await realDeadlock(t.url, `${t.schema}.pair`);
    expect((err as { code?: string }).code).toBe('40P01');
    expect(statementOf(err)).toBe('claimReadySteps');
    const { log, lines } = capture();
    logRetriedFailure(log, err, 'executor iteration failed; retrying', { delayMs: 40 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, code: '40P01', statement: 'claimReadySteps', delayMs: 40, msg: 'executor iteration failed; retrying (deadlock with another transaction)' });
  });

  it('keeps anything else at error, and an inner statement name wins over an outer one', async () => {
    const inner = await namingStatement('admitWorkflows', () => namingStatement('lockWorkflows', async () => { throw Object.assign(new Error('boom'), { code: 'XX000' }); })).catch((e: unknown) => e);
    expect(statementOf(inner)).toBe('lockWorkflows');
    const { log, lines } = capture();
    logRetriedFailure(log, inner, 'admitting new workflows failed; retrying');
    expect(lines[0]).toMatchObject({ level: 50, msg: 'admitting new workflows failed; retrying' });
    expect(statementOf(new Error('plain'))).toBeUndefined();
  });
});
