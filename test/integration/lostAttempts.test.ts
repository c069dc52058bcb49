/**
 * A lost attempt is the platform's failure, not the step's: it does not spend retry.maxAttempts.
 * A step whose tool SIGKILLs its own executor still ends: after retry.maxLost lost attempts it
 * fails with `lost`, naming the bound, and its workflow follows onError. Real executor processes,
 * restarted with the same id after each kill (start-up recovery fails the orphan as `lost`).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, waitForWorkflow } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { spawnExecutor } from '../helpers/processes.js';

const KILLER = fileURLToPath(new URL('../mcp-servers/executor-killer.ts', import.meta.url));

describe('a step whose tool kills its executor', () => {
  it('ends lost after retry.maxLost lost attempts, without spending maxAttempts, and its workflow follows onError', async () => {
    const t = await createTestSchema();
    const config = path.join(tempDirSync('stepd-lost-'), 'stepd.config.json');
    writeFileSync(config, JSON.stringify({ mcpServers: { killer: { command: process.execPath, args: [KILLER] } } }));
    const id = await insertWorkflow(t, {
      start: 'deadly',
      steps: {
        // maxAttempts 1: were lost attempts spent from it, the first kill would end the step.
        deadly: { tool: 'killer.kill_executor', retry: { maxAttempts: 1, maxLost: 3 }, onError: 'handled' },
        handled: { tool: 'core.echo', args: { code: '{{error.code}}', message: '{{error.message}}' }, done: true, output: '{{result}}' },
      },
    });
    let starts = 0;
    for (;;) {
      const [wf] = await t.q<{ status: string }>(`SELECT status FROM stepd.workflows WHERE id = $1`, [id]);
      if (wf!.status === 'completed' || wf!.status === 'failed') break;
      expect(++starts, 'executor starts').toBeLessThanOrEqual(5);
      const exec = await spawnExecutor(t, { executorId: 'killed-by-its-step', extraArgs: ['--config', config] });
      // Either the step kills it, or (after the last lost attempt) the workflow ends and we stop it.
      await Promise.race([exec.exited, waitForWorkflow(t, id)]);
      if (!exec.hasExited()) exec.signal('SIGKILL');
      await exec.waitForExit();
    }
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toMatchObject({ code: 'lost', message: expect.stringContaining('lost 3 times (retry.maxLost is 3)') });
    const deadly = (await getSteps(t, id)).filter((s) => s.name === 'deadly');
    expect(deadly.map((s) => [s.attempt, s.status, (s.error as { code?: string } | null)?.code])).toEqual([
      [1, 'failed', 'lost'],
      [2, 'failed', 'lost'],
      [3, 'failed', 'lost'],
    ]);
  });
});
