/**
 * Attacks on a signal's wake-up (sql/0036, sql/0039). A signal that readies a wait NOTIFYs at
 * commit only when no other signal wait is "on its way" (readied by another transaction in the
 * last second and still ready). A hostile client with its own login tries to make every other
 * tenant's signal skip its NOTIFY and wait for the executors' poll:
 * - by holding its own readied waits locked (claims skip locked rows), renewed every 400 ms;
 * - by writing `stepd.signal_wakeup` for other sessions (ALTER ROLE / DATABASE … SET).
 */
import pg from 'pg';
import { asExecutor } from '../helpers/db.js';
import { describe, expect, it } from 'vitest';
import { clientInsert, createClientRole, holdRow, onCleanup, refused, securityEnv, waitFor, waitForStep, waitForWorkflow, type ClientRole, type SecurityEnv } from './helpers.js';

const waitFlow = (name: string) => ({ start: 'w', steps: { w: { signal: { name, key: '{{input.k}}' }, done: true, output: '{{result}}' } } });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Longer than a second, so a wake-up left to the poll shows as a stall the test can see. */
const POLL_MS = 3_000;

/** A pending wait of `client`'s own: the workflow id and the wait step's id. */
async function ownWait(env: SecurityEnv, client: ClientRole, name: string, k: string): Promise<{ id: string; step: string }> {
  const id = await clientInsert(client, waitFlow(name), { input: { k } });
  const step = await waitForStep(env.t, id, 'w', 'pending');
  return { id, step: step.id };
}

/**
 * The attacker readies its own wait and, on a second connection queued behind that transaction's
 * row lock, takes the readied row FOR UPDATE the instant it commits: a ready signal wait, consumed
 * by another transaction less than a second ago, that no executor can claim. Returns the holder.
 */
async function readyAndHold(env: SecurityEnv, pool: pg.Pool, step: string, key: string): Promise<pg.PoolClient> {
  const s1 = await pool.connect();
  const s2 = await pool.connect();
  try {
    await s1.query('BEGIN');
    await s1.query(`INSERT INTO ${env.t.schema}.signals (name, key) VALUES ('atk.tick', $1)`, [key]);
    await s2.query('BEGIN');
    const locked = s2.query(`SELECT 1 FROM ${env.t.schema}.workflow_steps WHERE id = $1 FOR UPDATE`, [step]);
    await sleep(20);
    await s1.query('COMMIT');
    await locked;
  } finally {
    s1.release();
  }
  return s2;
}

describe('a client cannot suppress another tenant’s signal wake-up', () => {
  it('holding its own readied waits locked, renewed every 400 ms, does not delay another role’s signals by a second', async () => {
    const env = await securityEnv({ options: { pollIntervalMs: POLL_MS } });
    const victim = await createClientRole(env.t);
    const rounds = 12;
    const attacker = new pg.Pool({ connectionString: env.client.url, max: rounds + 2 });
    attacker.on('error', () => {});
    onCleanup(() => attacker.end().catch(() => {}));
    const waits = [];
    for (let i = 0; i < rounds; i++) waits.push(await ownWait(env, env.client, 'atk.tick', `a${i}`));
    const victims = [];
    for (let j = 0; j < 4; j++) victims.push(await ownWait(env, victim, 'vic.sig', `v${j}`));

    const held: pg.PoolClient[] = [];
    onCleanup(async () => {
      for (const c of held) c.release(true);
    });
    let stop = false;
    const attack = (async () => {
      for (let i = 0; i < rounds && !stop; i++) {
        held.push(await readyAndHold(env, attacker, waits[i]!.step, `a${i}`));
        await sleep(400);
      }
    })();
    // Past the executor's lookout and recheck for the attacker's first (NOTIFYing) signal.
    await sleep(1_500);
    const heldReady = await env.t.q(`SELECT id FROM stepd.workflow_steps WHERE id = ANY($1::bigint[]) AND status = 'ready'`, [waits.map((w) => w.step)]);
    expect(heldReady.length, 'the attack holds ready waits').toBeGreaterThanOrEqual(2);

    const latencies: number[] = [];
    for (const [j, v] of victims.entries()) {
      const [sig] = await victim.q<{ at: Date }>(`INSERT INTO stepd.signals (name, key) VALUES ('vic.sig', $1) RETURNING created_at AS at`, [`v${j}`]);
      const wf = await waitForWorkflow(env.t, v.id);
      expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
      latencies.push(new Date(wf.completed_at as unknown as string).getTime() - sig!.at.getTime());
      await sleep(650);
    }
    stop = true;
    await attack;
    for (const c of held.splice(0)) {
      await c.query('ROLLBACK');
      c.release();
    }
    // Measured before sql/0039: [1173, 3022, 24, 35] (the poll); after: tens of ms.
    expect(Math.max(...latencies), `victim latencies ${latencies.join(', ')} ms`).toBeLessThan(1_000);
    // The attacker's own waits are taken once let go (those the attack did not reach get a signal now).
    for (let i = 0; i < rounds; i++) await env.client.q(`INSERT INTO stepd.signals (name, key) VALUES ('atk.tick', $1)`, [`a${i}`]);
    for (const w of waits) expect((await waitForWorkflow(env.t, w.id)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('stepd.signal_wakeup is set only for the attacker’s own sessions: not for another role, nor database-wide', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const ident = pg.escapeIdentifier;
    await refused(env.client.q(`ALTER ROLE ${ident(victim.role)} SET stepd.signal_wakeup = '1'`), /permission denied|must be/);
    const [{ db }] = (await env.client.q<{ db: string }>(`SELECT current_database() AS db`)) as [{ db: string }];
    await refused(env.client.q(`ALTER DATABASE ${ident(db)} SET stepd.signal_wakeup = '1'`), /must be owner|permission denied/);
    // Its own role default reaches only its own sessions, and a victim's signal still wakes at once.
    await env.client.q(`ALTER ROLE ${ident(env.client.role)} SET stepd.signal_wakeup = '1'`).catch(() => {});
    const v = await ownWait(env, victim, 'vic.sig', 'v');
    const [sig] = await victim.q<{ at: Date }>(`INSERT INTO stepd.signals (name, key) VALUES ('vic.sig', 'v') RETURNING created_at AS at`);
    const wf = await waitForWorkflow(env.t, v.id);
    expect(wf.status).toBe('completed');
    expect(new Date(wf.completed_at as unknown as string).getTime() - sig!.at.getTime()).toBeLessThan(1_000);
  });
});

/**
 * The executor creates a signal wait's row under the wait's bucket lock (sql/0025), and a signal's
 * trigger holds that bucket until its transaction ends. A client that keeps a signal's transaction
 * open and starts a workflow whose first step (or a later one) waits on that bucket stalled the
 * executor's admissions (or outcomes) for every tenant (measured before the fix: > 20 s, the
 * admission transaction waiting in lockSignalWaitBuckets). Now an admission waits for a lock at
 * most ADMISSION_LOCK_WAIT_MS and defers only the workflow that met it (admissionLocks.ts);
 * an outcome batch hands it to the alone lane (outcomeLocks.ts). The held workflow's wait is
 * created, under the lock, once the holder lets go, and still receives a later signal.
 */
describe('a client holding a signal bucket open stalls no other tenant', () => {
  /** Opens a transaction on `client`'s own connection that inserts a signal (name, 'k') and stays open. */
  async function holdBucket(env: SecurityEnv, name: string): Promise<{ release(): Promise<void> }> {
    const conn = await env.client.pool.connect();
    let done = false;
    const release = async () => {
      if (done) return;
      done = true;
      await conn.query('ROLLBACK').catch(() => {});
      conn.release();
    };
    onCleanup(release);
    await conn.query('BEGIN');
    await conn.query(`INSERT INTO ${env.t.schema}.signals (name, key) VALUES ($1, 'k')`, [name]);
    return { release };
  }

  const quickFlow = { start: 'a', steps: { a: { tool: 'core.echo', args: {}, next: 'b' }, b: { tool: 'core.echo', args: {}, done: true } } };

  it('an open signal transaction plus a workflow whose first step waits on its bucket does not stop another role’s workflows', async () => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const held = await holdBucket(env, 'held.bucket');
    const stuck = await clientInsert(env.client, waitFlow('held.bucket'), { input: { k: 'k' } });
    await sleep(300);
    for (let i = 0; i < 3; i++) {
      const quick = await clientInsert(other, quickFlow);
      const wf = await waitForWorkflow(env.t, quick, undefined, 5_000);
      expect(wf.status).toBe('completed');
    }
    // The held workflow is not admitted with a wait created past the lock: it is still new.
    const [row] = await env.t.q<{ status: string }>(`SELECT status FROM stepd.workflows WHERE id = $1`, [stuck]);
    expect(row!.status).toBe('new');
    await held.release();
    // Let go: admitted, its wait created under the lock, and a signal sent now completes it.
    await waitForStep(env.t, stuck, 'w', 'pending');
    await env.client.q(`INSERT INTO stepd.signals (name, key) VALUES ('held.bucket', 'k')`);
    expect((await waitForWorkflow(env.t, stuck)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a signal committed while the held workflow was deferred is not missed (since: workflow)', async () => {
    const env = await securityEnv();
    const held = await holdBucket(env, 'held.late');
    const stuck = await clientInsert(env.client, waitFlow('held.late'), { input: { k: 'k' } });
    await sleep(300);
    // A second signal, after the workflow was written, queues behind the held bucket; both commit.
    const late = env.client.q(`INSERT INTO stepd.signals (name, key) VALUES ('held.late', 'k')`);
    await sleep(100);
    await held.release();
    await late;
    expect((await waitForWorkflow(env.t, stuck)).status).toBe('completed');
  });

  it('an outcome that advances into a wait on a held bucket does not stop another role’s outcomes', async () => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const held = await holdBucket(env, 'held.later');
    const flow = { start: 'a', steps: { a: { tool: 'core.echo', args: {}, next: 'w' }, w: { signal: { name: 'held.later', key: '{{input.k}}' }, done: true, output: '{{result}}' } } };
    const stuck = await clientInsert(env.client, flow, { input: { k: 'k' } });
    // Its outcome meets the held bucket: the step stays running under the executor, its outcome kept.
    await waitForStep(env.t, stuck, 'a', 'running');
    await sleep(500);
    for (let i = 0; i < 3; i++) {
      const quick = await clientInsert(other, quickFlow);
      const wf = await waitForWorkflow(env.t, quick, undefined, 5_000);
      expect(wf.status).toBe('completed');
    }
    expect((await env.t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'w'`, [stuck])).length).toBe(0);
    await held.release();
    await waitForStep(env.t, stuck, 'w', 'pending');
    await env.client.q(`INSERT INTO stepd.signals (name, key) VALUES ('held.later', 'k')`);
    expect((await waitForWorkflow(env.t, stuck)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('a client holding a signal bucket open stalls no other tenant’s redrives or claims', () => {
  it('redriving its own timed-out wait on a held bucket does not stop another role’s workflows', async () => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const flow = { start: 'w', steps: { w: { signal: { name: 'held.redrive', key: '{{input.k}}', timeout: '200ms' }, done: true, output: '{{result}}' } } };
    const id = await clientInsert(env.client, flow, { input: { k: 'k' } });
    expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
    const conn = await env.client.pool.connect();
    onCleanup(async () => {
      await conn.query('ROLLBACK').catch(() => {});
      conn.release(true);
    });
    await conn.query('BEGIN');
    await conn.query(`INSERT INTO ${env.t.schema}.signals (name, key) VALUES ('held.redrive', 'k')`);
    await env.client.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed'`, [id]);
    await sleep(300);
    for (let i = 0; i < 2; i++) {
      const quick = await clientInsert(other, { start: 'a', steps: { a: { tool: 'core.echo', args: {}, next: 'b' }, b: { tool: 'core.echo', args: {}, done: true } } });
      expect((await waitForWorkflow(env.t, quick, undefined, 5_000)).status).toBe('completed');
    }
    await conn.query('ROLLBACK');
    // Let go: the redrive is handled (not refused), its wait created under the lock.
    await waitFor(async () => (await env.t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'w' AND status = 'pending'`, [id]))[0], 'the redriven wait', 10_000);
    const [wf] = await env.t.q<{ status: string }>(`SELECT status FROM stepd.workflows WHERE id = $1`, [id]);
    expect(wf!.status).toBe('running');
  });
});

/**
 * A signal's trigger readies the matching pending wait rows. Clients have column UPDATE grants on
 * steps, so a client can hold ANOTHER tenant's pending wait row FOR UPDATE. Before sql/0042 that
 * blocked the tenant's signal INSERT for as long as the client liked; now the trigger skips a held
 * row and defers the match (signal_deferred_matches), and the watchdog readies the wait with that
 * signal once the row is let go.
 */
describe('a client holding another tenant’s wait row does not block that tenant’s signal', () => {
  const deferredOf = (env: SecurityEnv, step: string) =>
    env.t.q<{ workflow_id: string; signal_id: string }>(`SELECT workflow_id::text, signal_id::text FROM stepd.signal_deferred_matches WHERE step_id = $1`, [step]);

  it('the signal’s INSERT returns while the row is held, and the wait gets that signal once it is let go', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const v = await ownWait(env, victim, 'vic.held', 'k');
    const held = await holdRow(env.client.pool, env.t, v.step, { table: 'workflow_steps' });
    const sent = victim.q<{ id: string }>(`INSERT INTO stepd.signals (name, key) VALUES ('vic.held', 'k') RETURNING id::text`);
    const outcome = await Promise.race([sent.then(() => 'sent'), sleep(1_500).then(() => 'blocked')]);
    if (outcome === 'blocked') await held.release();
    expect(outcome).toBe('sent');
    const [sig] = await sent;
    // Deferred, not lost: recorded in the signal's committed transaction, and still deferred
    // across watchdog sweeps while the row stays held.
    expect(await deferredOf(env, v.step)).toEqual([{ workflow_id: v.id, signal_id: sig!.id }]);
    // A retry while the row is held readies nothing and keeps the match (what every sweep meets).
    expect(await asExecutor(env.t, `SELECT stepd.stepd_ready_deferred_matches_of_running_workflows(100) AS n`)).toEqual([{ n: 0 }]);
    expect(await deferredOf(env, v.step)).toHaveLength(1);
    expect((await env.t.q<{ status: string }>(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [v.step]))[0]!.status).toBe('pending');
    await held.release();
    const wf = await waitForWorkflow(env.t, v.id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toMatchObject({ id: sig!.id, name: 'vic.held', key: 'k' });
    expect(await deferredOf(env, v.step)).toEqual([]);
    expect(await env.t.q(`SELECT signal_id::text FROM stepd.signal_consumptions WHERE workflow_id = $1`, [v.id])).toEqual([{ signal_id: sig!.id }]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a signal whose transaction rolls back leaves no deferred match, and the wait takes the next signal', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const v = await ownWait(env, victim, 'vic.rb', 'k');
    const held = await holdRow(env.client.pool, env.t, v.step, { table: 'workflow_steps' });
    await victim.session(async (run) => {
      await run('BEGIN');
      await run(`INSERT INTO stepd.signals (name, key) VALUES ('vic.rb', 'k')`);
      await run('ROLLBACK');
    });
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.signal_deferred_matches`)).toEqual([{ n: 0 }]);
    await held.release();
    expect((await env.t.q<{ status: string }>(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [v.step]))[0]!.status).toBe('pending');
    const [sig] = await victim.q<{ id: string }>(`INSERT INTO stepd.signals (name, key) VALUES ('vic.rb', 'k') RETURNING id::text`);
    expect((await waitForWorkflow(env.t, v.id)).output).toMatchObject({ id: sig!.id });
  });

  it('clients cannot read or write the deferred matches, nor complete them', async () => {
    const env = await securityEnv();
    await refused(env.client.q(`SELECT * FROM stepd.signal_deferred_matches`), /permission denied/);
    await refused(env.client.q(`INSERT INTO stepd.signal_deferred_matches (workflow_id, signal_id, step_id) VALUES (1, 1, 1)`), /permission denied/);
    await refused(env.client.q(`SELECT stepd.stepd_ready_deferred_matches_of_running_workflows(10)`), /permission denied/);
  });
});
