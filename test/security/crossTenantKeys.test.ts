/**
 * Concurrency keys (sql/0028, DESIGN.md §2e) are counted per role (DESIGN.md §7: no tenant may
 * slow another's work by more than a second). A hostile client that holds a key value another
 * service uses — a flow-level key with limit 1 held by a workflow waiting at a gate, and a step
 * key held by running steps — must not stall that service's workflows of the same key value.
 * Within one role the key still serializes as before.
 */
import { describe, expect, it } from 'vitest';
import { clientInsert, createClientRole, getWorkflow, securityEnv, waitForStep, waitForWorkflow } from './helpers.js';

/** Takes the flow's key (its first tool step) and then waits at a gate, holding it. */
const HOG = {
  start: 'take',
  concurrency: { key: 'acct-{{input.account}}', limit: 1 },
  steps: { take: { tool: 'core.noop', next: 'hold' }, hold: { approval: true, done: true } },
};
const WORK = {
  start: 'work',
  concurrency: { key: 'acct-{{input.account}}', limit: 1 },
  steps: { work: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } },
};

describe('concurrency keys are per role', () => {
  it('a role holding a flow key value does not stall another role’s workflows of that value; its own wait', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const hog = await clientInsert(env.client, HOG, { input: { account: 42 } });
    await waitForStep(env.t, hog, 'hold', 'pending');
    expect(await env.t.q(`SELECT key_held FROM stepd.workflows WHERE id = $1`, [hog])).toEqual([{ key_held: true }]);

    const started = Date.now();
    const work = await clientInsert(victim, WORK, { input: { account: 42 } });
    const done = await waitForWorkflow(env.t, work, undefined, 10_000);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(Date.now() - started).toBeLessThan(5_000);

    // The hog's own second workflow of the value waits for its first.
    const second = await clientInsert(env.client, WORK, { input: { account: 42 } });
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await getWorkflow(env.t, second)).status).toBe('running');
    const gate = await waitForStep(env.t, hog, 'hold', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    expect((await waitForWorkflow(env.t, second)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('step keys too: the stored key names the role, so no client can name another role’s key value', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const flow = { start: 'a', steps: { a: { tool: 'core.echo', args: {}, concurrency: { key: 'shared', limit: 1 }, done: true } } };
    const a = await clientInsert(env.client, flow);
    const b = await clientInsert(victim, flow);
    await waitForWorkflow(env.t, a);
    await waitForWorkflow(env.t, b);
    const keys = await env.t.q(`SELECT w.created_role, s.concurrency_key FROM stepd.workflow_steps s JOIN stepd.workflows w ON w.id = s.workflow_id
                                 WHERE w.id = ANY($1::bigint[]) ORDER BY w.id`, [[a, b]]);
    expect(keys).toEqual([
      { created_role: env.client.role, concurrency_key: `${env.client.role}/shared` },
      { created_role: victim.role, concurrency_key: `${victim.role}/shared` },
    ]);
  });
});
