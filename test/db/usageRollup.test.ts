/**
 * sql/0030's sum: several steps of one workflow ending in one statement (as an outcome batch
 * records them) each add their usage to the workflow row; a step ending without usage adds nothing.
 * stepd_usage_of (for outcomes written in SQL, such as a worker's) reads a result's `usage` as
 * normalizeUsage does.
 */
import { describe, expect, it } from 'vitest';
import { normalizeUsage } from '../../src/usage/stepUsage.js';
import { asExecutor, createTestSchema, insertWorkflow } from '../helpers/db.js';

describe('workflows.usage', () => {
  it('two outcomes of one workflow in one statement both add up', async () => {
    const t = await createTestSchema();
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.noop' } } });
    await asExecutor(t, `UPDATE stepd.workflows SET status = 'running', started_at = now() WHERE id = $1`, [id]);
    await asExecutor(
      t,
      `INSERT INTO stepd.workflow_steps (workflow_id, name, tool, status, started_at, lease_until, executor_id)
       SELECT $1, n, 'core.noop', 'running', now(), now() + interval '1 hour', 'x' FROM unnest(ARRAY['a', 'b', 'c']) AS n`,
      [id],
    );
    await asExecutor(
      t,
      `UPDATE stepd.workflow_steps SET status = 'done', completed_at = now(), lease_until = NULL,
              usage = CASE WHEN name = 'c' THEN NULL ELSE jsonb_build_object('inputTokens', 1, 'outputTokens', 2, 'cost', 0.5) END
        WHERE workflow_id = $1`,
      [id],
    );
    const [w] = await t.q(`SELECT usage FROM stepd.workflows WHERE id = $1`, [id]);
    expect(w.usage).toEqual({ inputTokens: 2, outputTokens: 4, cost: 1 });
  });

  it('stepd_usage_of reads a result as normalizeUsage does', async () => {
    const t = await createTestSchema();
    const results: unknown[] = [
      { usage: { inputTokens: 10, outputTokens: 5, cost: 0.01, model: 'local/llama' } },
      { usage: { input_tokens: 7, output_tokens: 3 } },
      { usage: { prompt_tokens: 4.6, completion_tokens: 1 } },
      { usage: { inputTokens: null, input_tokens: 2, cost: 1 } },
      { usage: { cost: 0.5, model: '' } },
      { usage: { inputTokens: -1, outputTokens: 'many' } },
      { usage: { inputTokens: 1e15 } },
      { usage: 'lots' },
      { usage: [1, 2] },
      { answer: 42 },
      [1],
      'text',
      null,
    ];
    for (const result of results) {
      const [row] = await t.q(`SELECT stepd.stepd_usage_of($1::jsonb) AS u`, [JSON.stringify(result)]);
      const expected = normalizeUsage((result as { usage?: unknown } | null)?.usage) ?? null;
      expect(row.u, JSON.stringify(result)).toEqual(expected);
    }
  });
});
