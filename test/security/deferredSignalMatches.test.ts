/**
 * Signal matches deferred past a held wait row (sql/0042). A client may hold any step row FOR
 * UPDATE; a signal's trigger skips a held wait and records the match, and the watchdog readies the
 * wait with that signal once the row is free (test/security/wakeupSuppression.test.ts shows the
 * INSERT returning while the row is held). Here what the deferred match meets meanwhile:
 * - the workflow is cancelled: dropped, nothing readied;
 * - the workflow's row is being changed (a cancel on its way): tried again later, not completed;
 * - the wait's timeout passes: the signal, sent in time, is still delivered;
 * - more signals for the same workflow: queued behind it, delivered to a loop's waits in order;
 * - no executor at all (stopped, as by SIGKILL) and two retries at once: each match completed once;
 * - a client holding many rows with deferred matches: another tenant's match is not starved.
 */
import { describe, expect, it } from 'vitest';
import { asExecutor } from '../helpers/db.js';
import { clientInsert, createClientRole, getSteps, holdRow, securityEnv, startConfiguredExecutor, waitFor, waitForStep, waitForWorkflow, type ClientRole, type SecurityEnv } from './helpers.js';

const send = async (client: ClientRole, name: string, key: string | null, payload: object = {}): Promise<string> =>
  (await client.q<{ id: string }>(`INSERT INTO stepd.signals (name, key, payload) VALUES ($1, $2, $3) RETURNING id::text`, [name, key, JSON.stringify(payload)]))[0]!.id;

const deferredCount = async (env: SecurityEnv): Promise<number> =>
  (await env.t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.signal_deferred_matches`))[0]!.n;

/** The attacker (env.client) holds `victim`'s pending wait row; returns the workflow, its step and the hold. */
async function heldVictimWait(env: SecurityEnv, victim: ClientRole, flow: object, input: object) {
  const id = await clientInsert(victim, flow, { input });
  const step = await waitForStep(env.t, id, 'w', 'pending');
  const held = await holdRow(env.client.pool, env.t, step.id, { table: 'workflow_steps' });
  return { id, step: step.id, held };
}

const keyedWait = (name: string, extra: object = {}) => ({ start: 'w', steps: { w: { signal: { name, key: '{{input.k}}', ...extra }, done: true, output: '{{result}}' } } });

describe('a deferred signal match', () => {
  it('is dropped when its workflow is cancelled while the row is held: nothing readied or consumed', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const v = await heldVictimWait(env, victim, keyedWait('d.cancel'), { k: 'k' });
    await send(victim, 'd.cancel', 'k');
    expect(await deferredCount(env)).toBe(1);
    // The cancel cancels the workflow's live steps: it queues behind the held row (before any retry).
    const cancelled = victim.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [v.id]);
    // Blocked by the attacker's transaction itself (any other lock wait, a moment's, would let the
    // hold go before the cancel is queued on the row).
    await waitFor(
      async () =>
        (await env.t.q(`SELECT 1 FROM pg_stat_activity WHERE usename = $1 AND datname = current_database() AND $2::int = ANY (pg_blocking_pids(pid))`, [victim.role, v.held.pid]))[0],
      'the cancel waiting for the held row',
      10_000,
    );
    await v.held.release();
    await cancelled;
    await waitFor(async () => (await deferredCount(env)) === 0, 'the deferred match dropped', 10_000);
    expect((await waitForWorkflow(env.t, v.id)).status).toBe('cancelled');
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.signal_consumptions WHERE workflow_id = $1`, [v.id])).toEqual([{ n: 0 }]);
  });

  it('waits while its workflow’s row is being changed, even with the wait row free, and is delivered once the change is over', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const v = await heldVictimWait(env, victim, keyedWait('d.wfheld'), { k: 'k' });
    const sig = await send(victim, 'd.wfheld', 'k');
    expect(await deferredCount(env)).toBe(1);
    // Retries only where the test calls them.
    await env.executor.stop({ graceMs: 0 });
    await v.held.release();
    // The workflow row held as a cancel not yet committed holds it (the update of a non-key column).
    const wfHeld = await holdRow(env.client.pool, env.t, v.id, { table: 'workflows', mode: 'NO KEY UPDATE' });
    const retry = async () => (await asExecutor<{ n: number }>(env.t, `SELECT stepd.stepd_ready_deferred_matches_of_running_workflows(10) AS n`))[0]!.n;
    expect(await retry()).toBe(0);
    expect(await env.t.q(`SELECT tried_at IS NOT NULL AS tried FROM stepd.signal_deferred_matches`)).toEqual([{ tried: true }]);
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.signal_consumptions WHERE workflow_id = $1`, [v.id])).toEqual([{ n: 0 }]);
    expect((await env.t.q<{ status: string }>(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [v.step]))[0]!.status).toBe('pending');
    await wfHeld.release();
    expect(await retry()).toBe(1);
    expect(await deferredCount(env)).toBe(0);
    await startConfiguredExecutor(env.t, {}, { providers: [env.probe] });
    const wf = await waitForWorkflow(env.t, v.id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toMatchObject({ id: sig });
  });

  it('is still delivered when the wait’s timeout passed while the row was held: the signal came in time', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const v = await heldVictimWait(env, victim, keyedWait('d.timeout', { timeout: '500ms' }), { k: 'k' });
    const sig = await send(victim, 'd.timeout', 'k');
    await waitFor(async () => (await env.t.q(`SELECT 1 FROM stepd.workflow_steps WHERE id = $1 AND expires_at < now()`, [v.step]))[0], 'the timeout passed', 10_000);
    await v.held.release();
    const wf = await waitForWorkflow(env.t, v.id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toMatchObject({ id: sig });
  });

  it('queues the workflow’s later signals behind it: a loop’s waits receive them in the order sent', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const loop = { start: 'w', steps: { w: { signal: { name: 'd.tick' }, branch: [{ if: 'result.payload.n == 3', then: 'end' }], default: 'w' }, end: { done: true } } };
    const v = await heldVictimWait(env, victim, loop, {});
    const sent: string[] = [];
    for (let n = 1; n <= 3; n++) sent.push(await send(victim, 'd.tick', null, { n }));
    expect(await deferredCount(env)).toBe(3);
    await v.held.release();
    const wf = await waitForWorkflow(env.t, v.id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect((await getSteps(env.t, v.id)).filter((s) => s.name === 'w').map((s) => (s.result as { id: string }).id)).toEqual(sent);
    expect(await deferredCount(env)).toBe(0);
  });

  it('waits out a stopped executor, and two retries at once complete each match exactly once', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const n = 12;
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await clientInsert(victim, keyedWait('d.pair'), { input: { k: `k${i}` } }));
    const steps = await Promise.all(ids.map((id) => waitForStep(env.t, id, 'w', 'pending')));
    await env.executor.stop({ graceMs: 0 });
    // One attacker transaction holds every wait row; every signal is deferred.
    const held = await holdRow(env.client.pool, env.t, steps[0]!.id, {
      hold: (conn) => conn.query(`SELECT 1 FROM ${env.t.schema}.workflow_steps WHERE id = ANY($1::bigint[]) FOR UPDATE`, [steps.map((s) => s.id)]),
    });
    for (let i = 0; i < n; i++) await send(victim, 'd.pair', `k${i}`);
    expect(await deferredCount(env)).toBe(n);
    // No executor answers while the rows are held; a retry now readies nothing.
    expect(await asExecutor(env.t, `SELECT stepd.stepd_ready_deferred_matches_of_running_workflows(100) AS n`)).toEqual([{ n: 0 }]);
    await held.release();
    const retry = () => asExecutor<{ n: number }>(env.t, `SELECT stepd.stepd_ready_deferred_matches_of_running_workflows(5) AS n`);
    let readied = 0;
    while ((await deferredCount(env)) > 0) readied += (await Promise.all([retry(), retry()])).reduce((sum, [r]) => sum + r!.n, 0);
    expect(readied).toBe(n);
    expect(await env.t.q(`SELECT count(*)::int AS n, count(DISTINCT workflow_id)::int AS workflows FROM stepd.signal_consumptions`)).toEqual([{ n, workflows: n }]);
    // A fresh executor takes the readied waits.
    await startConfiguredExecutor(env.t, {}, { providers: [env.probe] });
    for (const id of ids) expect((await waitForWorkflow(env.t, id)).status).toBe('completed');
  });

  it('a client holding more deferred rows than a retry takes does not starve another tenant’s deferred match', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const own: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await clientInsert(env.client, keyedWait('d.own'), { input: { k: `a${i}` } });
      own.push((await waitForStep(env.t, id, 'w', 'pending')).id);
    }
    const v = await clientInsert(victim, keyedWait('d.victim'), { input: { k: 'v' } });
    const vStep = (await waitForStep(env.t, v, 'w', 'pending')).id;
    await env.executor.stop({ graceMs: 0 });
    const held = await holdRow(env.client.pool, env.t, own[0]!, {
      hold: (conn) => conn.query(`SELECT 1 FROM ${env.t.schema}.workflow_steps WHERE id = ANY($1::bigint[]) FOR UPDATE`, [own]),
    });
    for (let i = 0; i < 3; i++) await send(env.client, 'd.own', `a${i}`);
    const retryOne = async () => (await asExecutor<{ n: number }>(env.t, `SELECT stepd.stepd_ready_deferred_matches_of_running_workflows(1) AS n`))[0]!.n;
    // Retries of one match each: the held ones take turns (each tried once, none twice).
    for (let i = 0; i < 3; i++) expect(await retryOne()).toBe(0);
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.signal_deferred_matches WHERE tried_at IS NOT NULL`)).toEqual([{ n: 3 }]);
    // The victim's match (its row held only briefly, by someone else) comes first at the next retry.
    const brief = await holdRow(env.t.db, env.t, vStep, { table: 'workflow_steps' });
    const sig = await send(victim, 'd.victim', 'v');
    await brief.release();
    expect(await retryOne()).toBe(1);
    expect(await env.t.q(`SELECT status, result->>'id' AS id FROM stepd.workflow_steps WHERE id = $1`, [vStep])).toEqual([{ status: 'ready', id: sig }]);
    await held.release();
    await startConfiguredExecutor(env.t, {}, { providers: [env.probe] });
    expect((await waitForWorkflow(env.t, v)).status).toBe('completed');
  });

  it('is found in as many reads as workflows with a queue, however long a client makes its own queue (sql/0044)', async () => {
    const env = await securityEnv();
    // The client holds its own wait's row and floods it: 1,500 deferred matches in one queue.
    const own = await heldVictimWait(env, env.client, keyedWait('d.flood'), { k: 'k' });
    await env.client.q(`INSERT INTO stepd.signals (name, key) SELECT 'd.flood', 'k' FROM generate_series(1, 1500)`);
    expect(await deferredCount(env)).toBe(1500);
    const c = await env.t.db.connect();
    try {
      // Counted in this session before and after one try (rolled back: nothing changes).
      const rowsRead = async () =>
        Number((await c.query<{ n: string }>(
          `SELECT coalesce(sum(seq_tup_read + idx_tup_fetch), 0)::text AS n FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'signal_deferred_matches'`,
          [env.t.schema],
        )).rows[0]!.n);
      await c.query('BEGIN');
      const before = await rowsRead();
      const [{ readied }] = (await c.query<{ readied: number }>(`SELECT ${env.t.schema}.stepd_ready_deferred_matches_of_running_workflows(100) AS readied`)).rows as [{ readied: number }];
      expect(readied).toBe(0); // its wait is still held
      expect((await rowsRead()) - before).toBeLessThan(50);
      await c.query('ROLLBACK');
    } finally {
      c.release();
    }
    await own.held.release();
  });

  it('delivers intact a signal with an odd key at the 500-byte limit and a deep payload, deferred past a held row', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    // Zero-width, right-to-left, combining marks, astral emoji, a look-alike Cyrillic letter: 500 bytes exactly.
    const piece = '\u200b\u05d0\u0301😀\u0455';
    let key = '';
    while (Buffer.byteLength(key + piece) <= 500) key += piece;
    key += 'x'.repeat(500 - Buffer.byteLength(key));
    expect(Buffer.byteLength(key)).toBe(500);
    let deep: unknown = { end: '\u2028\u2029"\\' };
    for (let i = 0; i < 60; i++) deep = { d: deep };
    const v = await heldVictimWait(env, victim, keyedWait('d.odd'), { k: key });
    const sig = await send(victim, 'd.odd', key, deep as object);
    expect(await deferredCount(env)).toBe(1);
    await v.held.release();
    const wf = await waitForWorkflow(env.t, v.id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toMatchObject({ id: sig, key, payload: deep });
  });
});
