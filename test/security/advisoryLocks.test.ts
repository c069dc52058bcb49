/**
 * Advisory locks from an attacker's side. PostgreSQL lets every role that can connect take any
 * advisory lock, and the keys stepd used were derived from known strings
 * (`stepd.watchdog:<schema>`, `stepd.claim-limits:<schema>`, `stepd.executor:<schema>:<id>`, the
 * id defaulting to the host name, `stepd.migrate`), so a client that took one first decided what
 * the executors could do. The executors' locks are now rows of executor_leases
 * (sql/0018_executor_leases.sql), a table clients may neither read, write nor lock; the
 * migrators only wait on their lock when they have something to do, for a bounded time. Each
 * test takes the old lock as a real client role (and tries the new one) and shows that the
 * executor or migrator is not stopped.
 */
import { cp, writeFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { findSqlDir, migrate } from '../../src/db/migrate.js';
import { MigrationLockBusyError } from '../../src/db/migrationLock.js';
import { bossSchemaName } from '../../src/schedules/bossSchema.js';
import { ExecutorIdInUseError } from '../../src/executor/wakeups/listener.js';
import {
  assertServing,
  createClientRole,
  createSecuredSchema,
  insertWorkflow,
  onCleanup,
  refused,
  startConfiguredExecutor,
  waitFor,
  waitForWorkflow,
  type ClientRole,
  type TestSchema,
} from './helpers.js';

/**
 * A connection of the client's own that takes the advisory lock `key` (and sets `applicationName`
 * first, when given) and keeps it until the test ends.
 */
async function holdAdvisoryLock(client: ClientRole, key: string, applicationName?: string): Promise<number> {
  const conn = await client.pool.connect();
  onCleanup(async () => conn.release(true));
  if (applicationName) await conn.query(`SELECT set_config('application_name', $1, false)`, [applicationName]);
  const { rows } = await conn.query<{ pid: number }>(`SELECT pg_advisory_lock(hashtextextended($1, 0)), pg_backend_pid() AS pid`, [key]);
  return rows[0]!.pid;
}

/** pg-boss's own lock `key` of schema `boss` (its advisoryLockKey: a sha224 of known strings), held until the test ends. */
async function holdBossLock(client: ClientRole, boss: string, key: string): Promise<void> {
  const conn = await client.pool.connect();
  onCleanup(async () => conn.release(true));
  await conn.query(`SELECT pg_advisory_lock(('x' || encode(sha224((current_database() || '.pgboss.' || $1 || $2)::bytea), 'hex'))::bit(64)::bigint)`, [boss, key]);
}

/** What a client tries on the table of the executors' leases: every statement is refused for want of privilege. */
async function leasesRefused(client: ClientRole, name: string): Promise<void> {
  const noPrivilege = /permission denied/;
  await refused(client.q(`SELECT * FROM stepd.executor_leases`), noPrivilege);
  await refused(client.session(async (run) => {
    await run('BEGIN');
    return run(`SELECT 1 FROM stepd.executor_leases WHERE name = $1 FOR UPDATE`, [name]);
  }), noPrivilege);
  await refused(client.session(async (run) => {
    await run('BEGIN');
    return run(`LOCK TABLE stepd.executor_leases IN ROW SHARE MODE`);
  }), noPrivilege);
  await refused(client.q(`INSERT INTO stepd.executor_leases (name, holder) VALUES ($1, 'attacker') ON CONFLICT (name) DO UPDATE SET holder = 'attacker'`, [name]), noPrivilege);
  await refused(client.q(`UPDATE stepd.executor_leases SET holder = 'attacker', until = 'infinity' WHERE name = $1`, [name]), noPrivilege);
  await refused(client.q(`DELETE FROM stepd.executor_leases WHERE name = $1`, [name]), noPrivilege);
}

const leaseRow = async (t: TestSchema, name: string) =>
  (await t.q<{ holder: string | null; session_pid: number | null }>(`SELECT holder, session_pid FROM stepd.executor_leases WHERE name = $1`, [name]))[0];

describe('advisory locks held by a client', () => {
  it('a client holding `stepd.claim-limits:<schema>` cannot stop limited claims, nor lock the row the claims lock now', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const holder = await holdAdvisoryLock(client, `stepd.claim-limits:${t.schema}`);
    await leasesRefused(client, 'claim-limits');
    // With limits, every claim is counted under the claims lock (src/tools/limits.ts).
    await startConfiguredExecutor(t, { limits: { concurrency: 2, tools: { 'core.*': 1 } } });
    await assertServing(t);
    const ids = await Promise.all([1, 2, 3].map((i) => insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { i }, done: true, output: '{{result}}' } } })));
    for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
    // The client's session still holds the old key all along.
    const held = await t.q(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 AND granted`, [holder]);
    expect(held).toHaveLength(1);
  });

  it('a client holding `stepd.watchdog:<schema>` before the executors start cannot stop the watchdog, nor write its lease', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    await holdAdvisoryLock(client, `stepd.watchdog:${t.schema}`);
    await leasesRefused(client, 'watchdog');
    const executor = await startConfiguredExecutor(t, {}, { options: { executorId: 'leader-a', heartbeatIntervalMs: 100, deadAfterMs: 1_000 } });
    // A gate timeout is a leader-only duty: it is handled.
    const id = await insertWorkflow(t, {
      start: 'approve',
      steps: { approve: { approval: { timeout: '100ms', onTimeout: 'approve' }, next: 'act' }, act: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect((await leaseRow(t, 'watchdog'))?.holder).toBe('leader-a');

    // A second executor takes the lease over once the leader stops; the client still cannot.
    await startConfiguredExecutor(t, {}, { options: { executorId: 'leader-b', heartbeatIntervalMs: 100, deadAfterMs: 1_000 } });
    await executor.stop({ graceMs: 0 });
    await waitFor(async () => (await leaseRow(t, 'watchdog'))?.holder === 'leader-b', 'leader-b to take the watchdog lease');
    await refused(client.q(`UPDATE stepd.executor_leases SET holder = 'attacker' WHERE name = 'watchdog'`), /permission denied/);
    const next = await insertWorkflow(t, { start: 'approve', steps: { approve: { approval: { timeout: '100ms', onTimeout: 'approve' }, done: true } } });
    expect((await waitForWorkflow(t, next)).status).toBe('completed');
  });

  it('a client holding `stepd.executor:<schema>:<id>` (with the listener\'s application_name) cannot stop an executor with that id from starting', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const executorId = `host-${t.schema}`;
    const spoof = await holdAdvisoryLock(client, `stepd.executor:${t.schema}:${executorId}`, `stepd-executor:${executorId}`);
    await leasesRefused(client, `executor:${executorId}`);
    // Its session, with the listener's application_name, never counts as an executor's.
    expect(await t.q(`SELECT stepd.stepd_executor_session_alive($1, $2) AS alive`, [spoof, `stepd-executor:${executorId}`])).toEqual([{ alive: false }]);

    const first = await startConfiguredExecutor(t, {}, { options: { executorId } });
    await assertServing(t);
    const claim = await leaseRow(t, `executor:${executorId}`);
    const listener = await t.q<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND usename = current_user`, [`stepd-executor:${executorId}`]);
    expect(listener.map((r) => r.pid)).toContain(claim?.session_pid);

    // A second executor with the same id still refuses to start while the first runs…
    await expect(startConfiguredExecutor(t, {}, { options: { executorId } })).rejects.toBeInstanceOf(ExecutorIdInUseError);
    // …and starts once the first has stopped (a clean stop gives the id back).
    await first.stop({ graceMs: 0 });
    expect(await leaseRow(t, `executor:${executorId}`)).toBeUndefined();
    await startConfiguredExecutor(t, {}, { options: { executorId } });
    await assertServing(t);
  });

  it("an executor id claimed by a session that has ended is taken at once (a crashed executor's restart)", async () => {
    const t = await createSecuredSchema();
    const executorId = `crash-${t.schema}`;
    // The row a crashed executor left: its session (this connection) then ends.
    const conn = new pg.Client({ connectionString: t.url, application_name: `stepd-executor:${executorId}` });
    await conn.connect();
    const { rows } = await conn.query<{ pid: number }>(
      `INSERT INTO ${t.schema}.executor_leases (name, holder, session_pid, session_app)
       VALUES ($1, 'old-token', pg_backend_pid(), current_setting('application_name')) RETURNING session_pid AS pid`,
      [`executor:${executorId}`],
    );
    await conn.end();
    await waitFor(async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [rows[0]!.pid])).length === 0, 'the old session to end');
    await startConfiguredExecutor(t, {}, { options: { executorId } });
    await assertServing(t);
    expect((await leaseRow(t, `executor:${executorId}`))?.holder).not.toBe('old-token');
  });

  it('a client holding `stepd.migrate` (or pg-boss\'s migration and create-queue locks) cannot stop `stepd start`; a pending migration fails after lock_timeout naming the holder', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const migrateHolder = await holdAdvisoryLock(client, 'stepd.migrate');
    // pg-boss's createQueue always takes this one (with a 30 s lock_timeout): not needed when the queue is there.
    await holdBossLock(client, bossSchemaName(t.schema), 'create-queue');

    // Nothing pending (what `stepd start` finds on every start but the first): no wait at all.
    const again = await migrate({ url: t.url, schema: t.schema });
    expect(again.applied).toEqual([]);
    expect(again.roles.status).toBe('ready');
    expect(again.boss).toMatchObject({ status: 'ready', granted: true });
    await holdAdvisoryLock(client, `stepd.migrate.boss:${bossSchemaName(t.schema)}`);
    expect(await migrate({ url: t.url, schema: t.schema })).toMatchObject({ applied: [], boss: { status: 'ready', granted: true } });
    await startConfiguredExecutor(t);
    await assertServing(t);

    // Something pending: bounded wait, then an error that names the client's session.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'stepd-sql-'));
    onCleanup(() => rm(dir, { recursive: true, force: true }));
    await cp(findSqlDir(), dir, { recursive: true });
    await writeFile(path.join(dir, '9999_pending_probe.sql'), 'CREATE TABLE pending_probe (x integer);\n');
    const err = await migrate({ url: t.url, schema: t.schema, sqlDir: dir, lockTimeoutMs: 200 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MigrationLockBusyError);
    const busy = err as MigrationLockBusyError;
    expect(busy.holders).toEqual([{ pid: migrateHolder, role: client.role, applicationName: expect.any(String) }]);
    expect(busy.message).toContain(client.role);
    expect(busy.message).toContain(`pg_terminate_backend(${migrateHolder})`);
    expect(await t.q(`SELECT to_regclass($1) AS r`, [`${t.schema}.pending_probe`])).toEqual([{ r: null }]);
  });
});
