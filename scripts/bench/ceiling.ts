/**
 * Scenario 6a, the ceiling of doing it one step per transaction: a pgbench script that, per
 * transition, (tx 1) claims one ready row with SKIP LOCKED and (tx 2) marks it done and inserts
 * the next ready row — two commits per transition, as the issue describes. Run with pgbench
 * when it is installed, else by the same statements from this process (one connection per
 * client). Reported as transitions per second.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import pg from 'pg';
import { dropSchemaLater, newSchemaName, type Cleanup } from './pg.js';

const run = promisify(execFile);

export interface CeilingResult {
  clients: number;
  seconds: number;
  transitionsPerSec: number;
  tool: 'pgbench' | 'node-pg';
}

/**
 * Always returns one row (pgbench's \gset needs one): the claimed id, or 0 when every ready row
 * was taken — possible with many clients on two cores, when a client is descheduled between its
 * BEGIN (which fixes now()) and the claim while the others turn every ready row over. The seed
 * of 200 ready rows per client makes that rare; such a run still inserts its ready row.
 */
function claimSql(schema: string): string {
  return `WITH c AS (UPDATE ${schema}.transitions SET status = 'running', started_at = now()
 WHERE id = (SELECT id FROM ${schema}.transitions WHERE status = 'ready' AND ready_at <= now()
             ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id)
 SELECT coalesce((SELECT id FROM c), 0) AS claimed`;
}

function finishSql(schema: string, idParam: string): string[] {
  return [
    `UPDATE ${schema}.transitions SET status = 'done', completed_at = now() WHERE id = ${idParam}`,
    `INSERT INTO ${schema}.transitions (status) VALUES ('ready')`,
  ];
}

async function setUp(url: string, schema: string, readyRows: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench' });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`CREATE TABLE ${schema}.transitions (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      status text NOT NULL,
      ready_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      completed_at timestamptz)`);
    await client.query(`CREATE INDEX ON ${schema}.transitions (ready_at, id) WHERE status = 'ready'`);
    await client.query(`INSERT INTO ${schema}.transitions (status) SELECT 'ready' FROM generate_series(1, $1::int)`, [readyRows]);
  } finally {
    await client.end();
  }
}

let pgbenchPath: string | null | undefined;
export async function findPgbench(): Promise<string | null> {
  if (pgbenchPath === undefined) {
    try {
      pgbenchPath = (await run('sh', ['-c', 'command -v pgbench'])).stdout.trim() || null;
    } catch {
      pgbenchPath = null;
    }
  }
  return pgbenchPath;
}

async function withPgbench(bin: string, url: string, schema: string, clients: number, seconds: number): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepd-bench-pgbench-'));
  try {
    const script = path.join(dir, 'transition.sql');
    const [done, insert] = finishSql(schema, ':claimed');
    writeFileSync(script, ['BEGIN;', `${claimSql(schema).replace(/\n\s*/g, ' ')} \\gset`, 'COMMIT;', 'BEGIN;', `${done};`, `${insert};`, 'COMMIT;', ''].join('\n'));
    const u = new URL(url);
    const env = { ...process.env, PGPASSWORD: decodeURIComponent(u.password) };
    const args = ['-n', '-M', 'prepared', '-c', String(clients), '-j', String(clients), '-T', String(seconds), '-f', script,
      '-h', u.hostname, '-p', u.port || '5432', '-U', decodeURIComponent(u.username) || os.userInfo().username,
      decodeURIComponent(u.pathname.slice(1))];
    const { stdout } = await run(bin, args, { env });
    const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout) ?? /tps = ([\d.]+)/.exec(stdout);
    if (!m) throw new Error(`could not read pgbench's tps from:\n${stdout}`);
    const failed = /number of failed transactions: (\d+)/.exec(stdout);
    if (failed && Number(failed[1]) > 0) throw new Error(`pgbench: ${failed[1]} failed transactions:\n${stdout}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function withNodePg(url: string, schema: string, clients: number, seconds: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  const [done, insert] = finishSql(schema, '$1');
  const counts = await Promise.all(
    Array.from({ length: clients }, async () => {
      const c = new pg.Client({ connectionString: url, application_name: 'stepd-bench-ceiling' });
      await c.connect();
      let n = 0;
      try {
        while (performance.now() < until) {
          await c.query('BEGIN');
          const r = await c.query<{ claimed: string }>({ name: 'claim', text: claimSql(schema) });
          await c.query('COMMIT');
          const id = r.rows[0]?.claimed;
          if (id === undefined || id === '0') continue;
          await c.query('BEGIN');
          await c.query({ name: 'done', text: done!, values: [id] });
          await c.query({ name: 'insert', text: insert! });
          await c.query('COMMIT');
          n++;
        }
      } finally {
        await c.end();
      }
      return n;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

export async function runCeiling(opts: { url: string; cleanup: Cleanup; clients: number; seconds: number }): Promise<CeilingResult> {
  const schema = newSchemaName('ceiling');
  const drop = dropSchemaLater(opts.cleanup, opts.url, schema);
  try {
    await setUp(opts.url, schema, opts.clients * 200);
    const bin = await findPgbench();
    const tps = bin
      ? await withPgbench(bin, opts.url, schema, opts.clients, opts.seconds)
      : await withNodePg(opts.url, schema, opts.clients, opts.seconds);
    return { clients: opts.clients, seconds: opts.seconds, transitionsPerSec: tps, tool: bin ? 'pgbench' : 'node-pg' };
  } finally {
    await drop();
  }
}
