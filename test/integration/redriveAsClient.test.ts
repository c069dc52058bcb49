/**
 * Redrive is part of the SQL contract: a service holding only `<schema>_client` redrives its
 * failed workflow with plain SQL, and the guard lets it do exactly that and nothing more.
 */
import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, getWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';
import { createClientRole } from '../security/helpers.js';

describe('redrive from plain SQL as the client role', () => {
  it('sets a failed workflow back to running; the executor re-runs the failed step as the same user', async () => {
    const t = await createTestSchema();
    const broken = { on: true };
    const users: (string | null)[] = [];
    const tool: ToolProvider = {
      prefix: 'test',
      async call(_tool, _args, ctx) {
        users.push(ctx.user);
        if (broken.on) throw new StepError('broken', 'not yet', { retryable: false });
        return { ok: true };
      },
      async list() {
        return [{ name: 'work' }];
      },
    };
    await startExecutor(t, { tools: [tool] });
    const client = await createClientRole(t);
    const inserted = await client.q<{ id: string }>(
      `INSERT INTO stepd.workflows (name, flow) VALUES ('svc', $1) RETURNING id`,
      [JSON.stringify({ start: 's', steps: { s: { tool: 'test.work', args: {}, retry: { maxAttempts: 1 } } } })],
    );
    const id = inserted[0]!.id;
    expect((await waitForWorkflow(t, id)).status).toBe('failed');

    // Everything but the status stays the executor's (column grants, then the guard).
    await expect(client.q(`UPDATE stepd.workflows SET status = 'running', error = NULL WHERE id = $1`, [id])).rejects.toThrow(/permission denied|only status may be set/);
    await expect(client.q(`UPDATE stepd.workflows SET redrives = 5 WHERE id = $1`, [id])).rejects.toThrow(/permission denied|may not be changed that way/);
    await expect(client.q(`UPDATE stepd.workflows SET status = 'completed' WHERE id = $1`, [id])).rejects.toThrow(/can only be set to 'cancelled'/);

    broken.on = false;
    const updated = await client.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed' RETURNING status, redrive_requested_at`, [id]);
    expect(updated).toHaveLength(1);
    expect(updated[0].redrive_requested_at).not.toBeNull();
    const wf = await waitForWorkflow(t, id, ['completed']);
    expect(wf).toMatchObject({ redrives: 1, error: null, created_by: client.role });
    expect(users).toEqual([client.role, client.role]);
    expect((await getSteps(t, id)).map((s) => [s.attempt, s.status])).toEqual([
      [1, 'failed'],
      [2, 'done'],
    ]);
    // A second redrive of a completed workflow changes nothing.
    expect(await client.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed' RETURNING id`, [id])).toHaveLength(0);
    expect((await getWorkflow(t, id)).status).toBe('completed');
  });
});
