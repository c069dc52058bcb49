/**
 * Sub-workflows (sql/0011, src/executor/transitions/subWorkflows.ts) from an attacker's side: a registered flow
 * that starts itself stops at caps.subWorkflowDepth; a child runs with its parent's user and that
 * user's tool permissions whatever version of the child flow it starts (the check at start time is
 * not the only one); a client cannot graft a workflow under another's waiting step; a client's
 * cancel of a parent cascades to its child, and another client's is refused.
 */
import { describe, expect, it } from 'vitest';
import type { StepdFileConfig } from '../../src/configFile.js';
import { clientInsert, createClientRole, getSteps, refused, securityEnv, waitFor, waitForWorkflow } from './helpers.js';

const LOOP = { start: 'again', steps: { again: { workflow: { name: 'loop', input: {} }, done: true, output: '{{result}}' } } };

describe('sub-workflows cannot be used to escape the caps or the permissions', () => {
  it('a flow that starts itself stops at caps.subWorkflowDepth: every level fails, none is left running', async () => {
    const env = await securityEnv({ config: { caps: { subWorkflowDepth: 3 } } });
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('loop', $1)`, [JSON.stringify(LOOP)]);
    const [root] = await env.client.q<{ id: string }>(`INSERT INTO stepd.workflows (name, input) VALUES ('loop', '{}') RETURNING id`);
    const done = await waitForWorkflow(env.t, root!.id, undefined, 30_000);
    expect(done.status).toBe('failed');
    const tree = await env.t.q(`SELECT id, depth, status FROM stepd.workflows WHERE name = 'loop' ORDER BY depth`);
    expect(tree.map((w) => [w.depth, w.status])).toEqual([
      [0, 'failed'],
      [1, 'failed'],
      [2, 'failed'],
      [3, 'failed'],
    ]);
    const deepest = await getSteps(env.t, tree[3].id);
    expect(deepest.map((s) => (s.error as { code?: string } | null)?.code)).toEqual(['cap_exceeded']);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a child runs with its parent's user's permissions, whatever version of the child flow is the latest when it starts", async () => {
    const config: StepdFileConfig = { permissions: { default: ['core.*'], users: { bystander: ['probe.*'] } }, clients: {} };
    const env = await securityEnv({ config });
    const q = env.client.q;
    await q(`INSERT INTO stepd.flows (name, flow) VALUES ('child', $1)`, [JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: { ok: 1 }, done: true, output: '{{result}}' } } })]);
    const parent = { start: 'gate', steps: { gate: { approval: true, next: 'call' }, call: { workflow: { name: 'child', input: {} }, done: true, output: '{{result}}' } } };
    const id = await clientInsert(env.client, parent);
    const gate = await waitFor(async () => (await getSteps(env.t, id)).find((s) => s.name === 'gate' && s.status === 'pending'), 'the gate');
    // Between the start (where a caller may have checked the child's tools) and the child's start,
    // the child's owner stores a version calling a tool this user may not call.
    await q(`INSERT INTO stepd.flows (name, flow) VALUES ('child', $1)`, [JSON.stringify({ start: 'a', steps: { a: { tool: 'probe.whoami', done: true, output: '{{result}}' } } })]);
    await q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(env.t, id, undefined, 30_000);
    expect(wf.status).toBe('failed');
    const [child] = await env.t.q(`SELECT id, flow_version, created_by, created_role FROM stepd.workflows WHERE parent_id = $1`, [id]);
    expect(child).toMatchObject({ flow_version: 2, created_by: env.client.role, created_role: env.client.role });
    const childSteps = await getSteps(env.t, child.id);
    expect(childSteps.map((s) => (s.error as { code?: string } | null)?.code)).toEqual(['permission_denied']);
    expect(env.probe.calls.filter((c) => c.workflowId === String(child.id))).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client's cancel of its own parent takes the live child with it (children first, sql/0047); another client's is refused and the child runs on", async () => {
    const env = await securityEnv();
    await env.t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('gated-child', $1)`, [JSON.stringify({ start: 'ok', steps: { ok: { approval: true, done: true } } })]);
    const parentFlow = { start: 'sub', steps: { sub: { workflow: { name: 'gated-child', input: {} }, done: true } } };
    const other = await createClientRole(env.t);
    const childOf = async (id: string) =>
      waitFor(async () => (await env.t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE parent_id = $1`, [id]))[0]?.id, `the child of ${id}`);
    const parent = await clientInsert(env.client, parentFlow);
    const child = await childOf(parent);
    await waitFor(async () => (await env.t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'pending'`, [child]))[0], 'the child waiting');
    await refused(other.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [parent]), /may cancel only/);
    expect((await env.t.q<{ status: string }>(`SELECT status FROM stepd.workflows WHERE id = $1`, [child]))[0]!.status).toBe('running');
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [parent]);
    const statuses = await env.t.q<{ id: string; status: string }>(`SELECT id::text, status FROM stepd.workflows WHERE id IN ($1, $2) ORDER BY id`, [parent, child]);
    expect(statuses.map((r) => r.status)).toEqual(['cancelled', 'cancelled']);
    expect((await getSteps(env.t, child)).map((st) => st.status)).toEqual(['cancelled']);
    expect((await getSteps(env.t, parent)).map((st) => [st.status, st.result])).toEqual([['cancelled', null]]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client cannot graft a workflow under another workflow's waiting step, nor move one", async () => {
    const env = await securityEnv();
    const c = env.client;
    const [step] = await env.t.q(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = $1`, [env.bystander.id]);
    await refused(
      c.q(`INSERT INTO stepd.workflows (name, flow, input, parent_id, parent_step_id, depth) VALUES ('x', '{}', '{}', $1, $2, 1)`, [env.bystander.id, step.id]),
      /permission denied|may set only/,
    );
    const mine = await c.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, input, start_at) VALUES ('x', '{}', '{}', now() + interval '1 day') RETURNING id`);
    await refused(c.q(`UPDATE stepd.workflows SET parent_id = $2, parent_step_id = $3 WHERE id = $1`, [mine[0]!.id, env.bystander.id, step.id]), /permission denied|may not be changed/);
    await refused(c.q(`UPDATE stepd.workflows SET depth = 0 WHERE id = $1`, [mine[0]!.id]), /permission denied|may not be changed/);
    await refused(c.q(`UPDATE stepd.workflow_steps SET child_id = $2 WHERE id = $1`, [step.id, mine[0]!.id]), /permission denied|may set only/);
    await c.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [mine[0]!.id]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a flow whose forEach starts itself stops at caps.subWorkflows child workflows per top-level workflow (cap_exceeded)', async () => {
    // Unbounded, three items and depth 4 would start 3 + 9 + 27 + 81 = 120 workflows.
    const env = await securityEnv({ config: { caps: { subWorkflowDepth: 4, subWorkflows: 10 } } });
    const fan = {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.items}}', step: 'one' }, join: 'end' },
        one: { workflow: { name: 'fan', input: { items: '{{input.items}}' } } },
        end: { tool: 'core.echo', args: {}, done: true },
      },
    };
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('fan', $1)`, [JSON.stringify(fan)]);
    const [root] = await env.client.q<{ id: string }>(`INSERT INTO stepd.workflows (name, input) VALUES ('fan', '{"items": [1, 2, 3]}') RETURNING id`);
    const done = await waitForWorkflow(env.t, root!.id, undefined, 60_000);
    expect(done.status).toBe('failed');
    const tree = await env.t.q(`SELECT id, root_id FROM stepd.workflows WHERE name = 'fan' AND id <> $1`, [root!.id]);
    expect(tree).toHaveLength(10);
    for (const w of tree) expect(w.root_id).toBe(root!.id);
    const capped = await env.t.q(
      `SELECT s.error FROM stepd.workflow_steps s JOIN stepd.workflows w ON w.id = s.workflow_id
        WHERE (w.id = $1 OR w.root_id = $1) AND s.error->>'code' = 'cap_exceeded'`,
      [root!.id],
    );
    expect(capped.length).toBeGreaterThan(0);
    for (const c of capped) expect(JSON.stringify(c.error)).toContain('"cap":"subWorkflows","limit":10');
    // Nothing of the tree is left running.
    await waitFor(async () => (await env.t.q(`SELECT id FROM stepd.workflows WHERE root_id = $1 AND status IN ('new', 'running')`, [root!.id])).length === 0, 'the tree to end');
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a child's input above caps.inputBytes fails its step with cap_exceeded before any child row is written", async () => {
    const env = await securityEnv({ config: { caps: { inputBytes: 200 } } });
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('child', $1)`, [JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: {}, done: true } } })]);
    const parent = { start: 'call', steps: { call: { workflow: { name: 'child', input: { text: '{{input.text}}{{input.text}}' } }, done: true } } };
    const id = await clientInsert(env.client, parent, { input: { text: 'x'.repeat(120) } });
    expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
    const [step] = (await getSteps(env.t, id)).filter((s) => s.name === 'call');
    expect(JSON.stringify(step!.error)).toContain('"cap":"inputBytes","limit":200');
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [id])).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});
