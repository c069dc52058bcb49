/**
 * One role cannot crowd out another: while role A's self-recursive tree of sub-workflows, its
 * burst of one-step workflows or its forEach of thousands keeps every slot of the executor busy,
 * role B's one-step workflow completes within a second of its insert (completed_at - created_at,
 * from the rows). Admission and claims are fair across roles (sql/0022, src/db/queries/lanes.ts).
 *
 * The executor has 4 slots and A's steps hold one for 20 ms each: served in arrival order, B's
 * step would wait for hundreds of A's (several seconds); fairly, for a claim or two.
 */
import { describe, expect, it } from 'vitest';
import type { StepdFileConfig } from '../../src/configFile.js';
import type { ToolContext, ToolInfo, ToolProvider } from '../../src/tools/tool.js';
import { createClientRole, securityEnv, waitFor, waitForWorkflow, type ClientRole, type SecurityEnv } from './helpers.js';

/** The documented bound: another role's one-step workflow completes within a second. */
const BOUND_MS = 1_000;
const SLOTS = 4;
const STEP_MS = 20;

/** Slow-ish tools that hold a slot: `load.work` sleeps; `load.kids` answers the children a tree node starts. */
class LoadTools implements ToolProvider {
  readonly prefix = 'load';

  async call(tool: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    const a = (args ?? {}) as { ms?: number; depth?: number };
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, a.ms ?? STEP_MS);
      ctx.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
    if (tool === 'work') return { ok: true };
    // 31 children at depths 0 and 1: 31 + 961 = 992 children, within caps.subWorkflows (1,000).
    if (tool === 'kids') return { kids: (a.depth ?? 0) < 2 ? Array.from({ length: 31 }, () => (a.depth ?? 0) + 1) : [] };
    throw new Error(`load has no tool ${tool}`);
  }

  async list(): Promise<ToolInfo[]> {
    return [{ name: 'work' }, { name: 'kids' }];
  }
}

const ONE_STEP = { start: 'one', steps: { one: { tool: 'load.work', args: { ms: 1 }, done: true, output: '{{result}}' } } };

/** A flow that starts itself: each node holds a slot, then starts 31 copies of itself, two levels deep. */
const TREE = {
  start: 'work',
  steps: {
    work: { tool: 'load.kids', args: { depth: '{{input.depth}}' }, next: 'each' },
    each: { forEach: { items: '{{steps.work.result.kids}}', step: 'kid' } },
    kid: { workflow: { name: 'tree', input: { depth: '{{item}}' } } },
  },
};

async function crowdedEnv(config: StepdFileConfig = {}): Promise<{ env: SecurityEnv; a: ClientRole; b: ClientRole }> {
  const env = await securityEnv({ config, providers: [new LoadTools()], options: { concurrency: SLOTS } });
  const b = await createClientRole(env.t);
  return { env, a: env.client, b };
}

/**
 * Role B inserts a one-step workflow while A's attack runs; it completes within the bound
 * (measured from its row), and A's attack was still under way when it did.
 */
async function assertBServedWhileAttacked(env: SecurityEnv, b: ClientRole, attackUnderWay: () => Promise<boolean>): Promise<void> {
  const [row] = await b.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow) VALUES ('b-one-step', $1) RETURNING id`, [JSON.stringify(ONE_STEP)]);
  const done = await waitForWorkflow(env.t, row!.id, undefined, 60_000);
  expect(done.status, JSON.stringify(done.error)).toBe('completed');
  expect(await attackUnderWay(), "the attack had ended before B's workflow completed: nothing was measured").toBe(true);
  const [timing] = await env.t.q<{ ms: number; role: string }>(
    `SELECT extract(epoch FROM completed_at - created_at) * 1000 AS ms, created_role AS role FROM stepd.workflows WHERE id = $1`,
    [row!.id],
  );
  expect(timing!.role).toBe(b.role);
  expect(Number(timing!.ms), "B's one-step workflow waited behind A's work").toBeLessThan(BOUND_MS);
  await env.bystander.assertUndisturbedAndServed();
}

/** A's live steps and new workflows: its attack is under way while there are any. */
async function liveWorkOf(env: SecurityEnv, role: string): Promise<number> {
  const [r] = await env.t.q<{ n: number }>(
    `SELECT (SELECT count(*) FROM stepd.workflows WHERE created_role = $1 AND status = 'new')
          + (SELECT count(*) FROM stepd.workflow_steps s JOIN stepd.workflows w ON w.id = s.workflow_id
              WHERE w.created_role = $1 AND s.status IN ('ready', 'running'))::int AS n`,
    [role],
  );
  return Number(r!.n);
}

describe('one role cannot crowd out another', () => {
  it("a self-recursive tree of ~1,000 sub-workflows (within the caps) delays another role's one-step workflow by less than a second", async () => {
    const { env, a, b } = await crowdedEnv();
    await a.q(`INSERT INTO stepd.flows (name, flow) VALUES ('tree', $1)`, [JSON.stringify(TREE)]);
    const [root] = await a.q<{ id: string }>(`INSERT INTO stepd.workflows (name, input) VALUES ('tree', '{"depth": 0}') RETURNING id`);
    const children = async () => Number((await env.t.q(`SELECT count(*) AS n FROM stepd.workflows WHERE root_id = $1`, [root!.id]))[0].n);
    // The second level is being spawned: hundreds of A's children are new or running.
    await waitFor(async () => (await children()) >= 300 || undefined, "A's tree to grow", 60_000);
    // Every child counts as A's: the tree is the attacker's role, not the executor's.
    const roles = await env.t.q(`SELECT DISTINCT created_role FROM stepd.workflows WHERE root_id = $1`, [root!.id]);
    expect(roles.map((r) => r.created_role)).toEqual([a.role]);
    await assertBServedWhileAttacked(env, b, async () => (await liveWorkOf(env, a.role)) > 0);
  });

  it.each<[string, StepdFileConfig]>([
    ['', {}],
    [', claims under limits', { limits: { defaultUser: 1_000 } }],
  ])("a burst of 5,000 one-step workflows delays another role's one-step workflow by less than a second%s", async (_label, config) => {
    const { env, a, b } = await crowdedEnv(config);
    await a.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'burst', $1::jsonb FROM generate_series(1, 5000)`, [
      JSON.stringify({ start: 'one', steps: { one: { tool: 'load.work', args: {}, done: true } } }),
    ]);
    await waitFor(async () => (await env.t.q(`SELECT 1 FROM stepd.workflows WHERE name = 'burst' AND status = 'completed' LIMIT 1`)).length > 0 || undefined, 'the burst to be under way');
    await assertBServedWhileAttacked(env, b, async () => (await liveWorkOf(env, a.role)) > 0);
  });

  it("a forEach of 9,998 slow tool steps saturating every slot delays another role's one-step workflow by less than a second", async () => {
    const { env, a, b } = await crowdedEnv();
    const fan = { maxSteps: 10_000, start: 'each', steps: { each: { forEach: { items: '{{input.items}}', step: 'item' } }, item: { tool: 'load.work', args: {} } } };
    const [row] = await a.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('fan', $1, $2) RETURNING id`, [
      JSON.stringify(fan),
      JSON.stringify({ items: Array.from({ length: 9_998 }, (_, i) => i) }),
    ]);
    await waitFor(async () => (await env.t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'item' AND status = 'done' LIMIT 1`, [row!.id])).length > 0 || undefined, 'the fan-out to be under way');
    await assertBServedWhileAttacked(env, b, async () => (await env.t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [row!.id]))[0].status === 'running');
  });
});
