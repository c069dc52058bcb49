import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';

const echo = { tool: 'core.echo', args: { topic: '{{input.topic}}' }, done: true, output: '{{result}}' };

describe('inputSchema at admission', () => {
  it('fails a workflow whose input does not match with invalid_input, every issue with its path, before any step; a matching one runs', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      inputSchema: { type: 'object', required: ['topic'], properties: { topic: { type: 'string' }, depth: { type: 'integer', minimum: 1 } } },
      start: 'say',
      steps: { say: echo },
    };
    const bad = await insertWorkflow(t, flow, { depth: 0 });
    const good = await insertWorkflow(t, flow, { topic: 'ok', depth: 2 });
    const wf = await waitForWorkflow(t, bad);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({
      code: 'invalid_input',
      issues: [
        { path: 'input.topic', message: 'is required' },
        { path: 'input.depth', message: 'must be >= 1' },
      ],
    });
    expect(await getSteps(t, bad)).toEqual([]);
    expect(await waitForWorkflow(t, good)).toMatchObject({ status: 'completed', output: { topic: 'ok' } });
  });
});
