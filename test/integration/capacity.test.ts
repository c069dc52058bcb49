/**
 * Sharing capacity on the real database (docs/limits-and-fairness.md): flow- and step-level
 * concurrency keys and rate limits across two executors, and priority on one executor of
 * concurrency 1. Times are read from the rows (started_at, completed_at), never from the clock
 * of the test.
 */
import { describe, expect, it } from 'vitest';
import { createLimitPolicy } from '../../src/tools/limits.js';
import { ratePolicy } from '../../src/tools/rates.js';
import { createTestSchema, startExecutor, waitFor, type TestSchema } from '../helpers/db.js';

async function insertMany(t: TestSchema, flow: unknown, inputs: unknown[], priority = 0): Promise<string[]> {
  const rows = await t.q<{ id: string }>(
    `INSERT INTO stepd.workflows (name, flow, input, priority)
     SELECT 'cap', $1::jsonb, i, $3 FROM jsonb_array_elements($2::jsonb) AS i RETURNING id`,
    [JSON.stringify(flow), JSON.stringify(inputs), priority],
  );
  return rows.map((r) => r.id);
}

async function waitAllEnded(t: TestSchema, ids: string[], timeoutMs = 60_000): Promise<void> {
  await waitFor(
    async () => (await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'cancelled')`, [ids]))[0]!.n === ids.length,
    `${ids.length} workflows to end`,
    timeoutMs,
  );
}

interface Span {
  key: string;
  from: number;
  to: number;
}

const overlaps = (a: Span, b: Span): boolean => a.from < b.to && b.from < a.to;

describe('keyed concurrency', () => {
  it('a flow-level key with limit 1 never runs two workflows of one key at once, while other keys run in parallel (two executors)', async () => {
    const t = await createTestSchema();
    const flow = {
      start: 'a',
      concurrency: { key: 'repo-{{input.repo}}', limit: 1 },
      steps: { a: { tool: 'core.sleep', args: { ms: 120 }, next: 'b' }, b: { tool: 'core.sleep', args: { ms: 60 }, done: true } },
    };
    const inputs = Array.from({ length: 18 }, (_, i) => ({ repo: i % 3 }));
    const ids = await insertMany(t, flow, inputs);
    await startExecutor(t, { concurrency: 4 });
    await startExecutor(t, { concurrency: 4 });
    await waitAllEnded(t, ids);
    const spans = await t.q<{ key: string; from: string; to: string; status: string; attempts: number }>(
      `SELECT split_part(w.concurrency_key, '/', 2) AS key, w.status, extract(epoch FROM min(s.started_at)) * 1000 AS from,
              extract(epoch FROM w.completed_at) * 1000 AS to, max(s.attempt)::int AS attempts
         FROM stepd.workflows w JOIN stepd.workflow_steps s ON s.workflow_id = w.id
        WHERE w.id = ANY($1::bigint[]) GROUP BY w.id`,
      [ids],
    );
    expect(spans.every((s) => s.status === 'completed' && s.attempts === 1)).toBe(true);
    const list: Span[] = spans.map((s) => ({ key: s.key, from: Number(s.from), to: Number(s.to) }));
    expect(new Set(list.map((s) => s.key))).toEqual(new Set(['repo-0', 'repo-1', 'repo-2']));
    let parallel = 0;
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const a = list[i]!;
        const b = list[j]!;
        if (a.key === b.key) expect(overlaps(a, b), `two workflows of ${a.key} ran at once`).toBe(false);
        else if (overlaps(a, b)) parallel++;
      }
    }
    expect(parallel).toBeGreaterThan(0);
    // Every holder ended: the key is free again.
    expect((await t.q(`SELECT 1 FROM stepd.workflows WHERE status = 'running' AND key_held`)).length).toBe(0);
  });

  it('a key-blocked step stays ready: never failed for waiting (not even past its timeout), no attempt spent, started in ready order', async () => {
    const t = await createTestSchema();
    const flow = {
      start: 'a',
      steps: { a: { tool: 'core.sleep', args: { ms: 400 }, timeout: '1s', concurrency: { key: '{{input.account}}', limit: 1 }, done: true } },
    };
    const ids = await insertMany(t, flow, [{ account: 'acme' }, { account: 'acme' }, { account: 'acme' }, { account: 'acme' }, { account: 'other' }]);
    await startExecutor(t, { concurrency: 4 });
    await startExecutor(t, { concurrency: 4 });
    // While one acme step runs, the others wait ready with attempt 1 and no executor.
    const waiting = await waitFor(
      async () => {
        const rows = await t.q<{ status: string; attempt: number; executor_id: string | null; started_at: Date | null }>(
          `SELECT status, attempt, executor_id, started_at FROM stepd.workflow_steps WHERE concurrency_key = session_user || '/acme' AND status = 'ready'`,
        );
        return rows.length === 3 ? rows : undefined;
      },
      'three acme steps waiting for their key',
    );
    expect(waiting.every((r) => r.attempt === 1 && r.executor_id === null && r.started_at === null)).toBe(true);
    await waitAllEnded(t, ids);
    const steps = await t.q<{ workflow_id: string; status: string; attempt: number; key: string; from: number; to: number }>(
      `SELECT workflow_id, status, attempt, split_part(concurrency_key, '/', 2) AS key, extract(epoch FROM started_at) * 1000 AS from, extract(epoch FROM completed_at) * 1000 AS to
         FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[]) ORDER BY id`,
      [ids],
    );
    expect(steps).toHaveLength(5);
    expect(steps.every((s) => s.status === 'done' && s.attempt === 1)).toBe(true);
    const acme = steps.filter((s) => s.key === 'acme').map((s) => ({ key: s.key, from: Number(s.from), to: Number(s.to) }));
    for (let i = 1; i < acme.length; i++) expect(acme[i]!.from).toBeGreaterThanOrEqual(acme[i - 1]!.to); // ready order, one at a time
  });
});

describe('a flow key is given back', () => {
  it('when its holder is cancelled from outside: the next workflow of the key starts', async () => {
    const t = await createTestSchema();
    const flow = { start: 'a', concurrency: { key: 'solo', limit: 1 }, steps: { a: { tool: 'core.sleep', args: { ms: '{{input.ms}}' }, done: true } } };
    const [holder] = await insertMany(t, flow, [{ ms: 60_000 }]);
    await startExecutor(t, { concurrency: 4 });
    await startExecutor(t, { concurrency: 4 });
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE id = $1 AND key_held`, [holder])).length === 1, 'the first workflow to hold the key');
    const [next] = await insertMany(t, flow, [{ ms: 1 }]);
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'ready'`, [next])).length === 1, 'the second to wait');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [holder]);
    await waitAllEnded(t, [next!]);
    const [w] = await t.q<{ status: string }>(`SELECT status FROM stepd.workflows WHERE id = $1`, [next]);
    expect(w!.status).toBe('completed');
  });
});

describe('keys do not hide each other', () => {
  it("a backlog of one full key never holds back other keys' steps behind it", async () => {
    const t = await createTestSchema();
    const flow = { start: 'a', steps: { a: { tool: 'core.sleep', args: { ms: 20 }, concurrency: { key: '{{input.k}}', limit: 1 }, done: true } } };
    const hot = await insertMany(t, flow, Array.from({ length: 300 }, () => ({ k: 'hot' })));
    const others = await insertMany(t, flow, ['b', 'c', 'd', 'e', 'f'].map((k) => ({ k })));
    await startExecutor(t, { concurrency: 4 });
    await waitAllEnded(t, others);
    const [left] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE id = ANY($1::bigint[]) AND status <> 'completed'`, [hot]);
    // The hot key runs one at a time (20 ms each): most of its backlog still waits.
    expect(left!.n).toBeGreaterThan(200);
  });
});

describe('rate limits', () => {
  it('10/s lets 100 steps through, never more than 10 started in any second, across two executors', async () => {
    const t = await createTestSchema();
    const rates = ratePolicy({ 'core.echo': '10/s' });
    const flow = { start: 'a', steps: { a: { tool: 'core.echo', args: { n: '{{input.n}}' }, done: true } } };
    const ids = await insertMany(t, flow, Array.from({ length: 100 }, (_, n) => ({ n })));
    await startExecutor(t, { concurrency: 8, rates });
    await startExecutor(t, { concurrency: 8, rates });
    await waitAllEnded(t, ids, 60_000);
    const perSecond = await t.q<{ second: Date; n: number }>(
      `SELECT date_trunc('second', started_at) AS second, count(*)::int AS n FROM stepd.workflow_steps
        WHERE workflow_id = ANY($1::bigint[]) GROUP BY 1 ORDER BY 1`,
      [ids],
    );
    expect(perSecond.reduce((a, r) => a + r.n, 0)).toBe(100);
    expect(Math.max(...perSecond.map((r) => r.n))).toBeLessThanOrEqual(10);
    // About 10 s of starts: at least 10 distinct seconds (a token every 100 ms).
    expect(perSecond.length).toBeGreaterThanOrEqual(10);
    const failed = await t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[]) AND status <> 'done'`, [ids]);
    expect(failed).toHaveLength(0);
  }, 90_000);
});

describe('priority', () => {
  for (const limited of [false, true]) {
    it(`5 high-priority workflows queued after 500 low ones start before all but the few already started (one executor, concurrency 1${limited ? ', with limits' : ''})`, async () => {
      const t = await createTestSchema();
      const flow = { start: 'a', steps: { a: { tool: 'core.sleep', args: { ms: 1 }, next: 'b' }, b: { tool: 'core.sleep', args: { ms: 1 }, done: true } } };
      const low = await insertMany(t, flow, Array.from({ length: 500 }, (_, n) => ({ n })));
      const high = await insertMany(t, flow, Array.from({ length: 5 }, (_, n) => ({ n })), 5);
      await startExecutor(t, { concurrency: 1, ...(limited ? { limits: createLimitPolicy({ tools: { 'core.sleep': 1 } }) } : {}) });
      await waitAllEnded(t, high, 60_000);
      const [last] = await t.q<{ at: Date }>(`SELECT max(completed_at) AS at FROM stepd.workflows WHERE id = ANY($1::bigint[])`, [high]);
      const [before] = await t.q<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[]) AND started_at <= $2`,
        [low, last!.at],
      );
      expect(before!.n).toBeLessThanOrEqual(5);
      // The steps carried their workflow's priority.
      const prio = await t.q<{ p: number }>(`SELECT DISTINCT priority AS p FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[])`, [high]);
      expect(prio.map((r) => r.p)).toEqual([5]);
    }, 90_000);
  }
});
