/**
 * The progress column (sql/0010) from an attacker's side: a client role cannot write a step's
 * progress, with or without the executor marker, on a pending gate or a finished step.
 */
import { describe, expect, it } from 'vitest';
import { getSteps, refused, securityEnv } from './helpers.js';

describe('progress is the executor\'s', () => {
  it('a client can write no progress, with or without the executor marker', async () => {
    const env = await securityEnv();
    const [gate] = await getSteps(env.t, env.bystander.id);
    const forged = `UPDATE stepd.workflow_steps SET progress = '{"progress": 99, "total": 100, "message": "almost done"}' WHERE id = $1`;
    await refused(env.client.q(forged, [gate!.id]), /permission denied|written by the executor only/);
    await env.client.session(async (q) => {
      await q(`SET stepd.executor = 'on'`);
      await refused(q(forged, [gate!.id]), /permission denied|written by the executor only/);
    });
    // Readying (the one step write a client may make) cannot carry progress either.
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', progress = '{"progress": 1}' WHERE id = $1`, [gate!.id]), /permission denied/);
    expect((await getSteps(env.t, env.bystander.id))[0]!.progress).toBeNull();
    await env.bystander.assertUndisturbedAndServed();
  });
});
