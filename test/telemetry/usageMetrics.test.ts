/** Tokens and cost in /metrics: by model, user and direction, with both labels bounded. */
import { describe, expect, it } from 'vitest';
import { PromMetrics } from '../../src/telemetry/promMetrics.js';
import { MAX_USAGE_LABELS } from '../../src/telemetry/usageMetrics.js';

describe('usage metrics', () => {
  it('counts tokens by direction and cost by model and user', async () => {
    const m = new PromMetrics({ processMetrics: false });
    m.usage('james', { model: 'main/gpt-4o-mini', inputTokens: 100, outputTokens: 20, cost: 0.000027 });
    m.usage('james', { model: 'main/gpt-4o-mini', inputTokens: 50, outputTokens: 0, cost: 0.0000075 });
    m.usage(null, { inputTokens: 3, outputTokens: 4, cost: 0 });
    const text = await m.render();
    expect(text).toContain('stepd_usage_tokens_total{model="main/gpt-4o-mini",user="james",direction="input"} 150');
    expect(text).toContain('stepd_usage_tokens_total{model="main/gpt-4o-mini",user="james",direction="output"} 20');
    expect(text).toContain('stepd_usage_cost_total{model="main/gpt-4o-mini",user="james"} 0.0000345');
    expect(text).toContain('stepd_usage_tokens_total{model="none",user="none",direction="output"} 4');
  });

  it('a flood of distinct users and models cannot grow the label sets past their bound', async () => {
    const m = new PromMetrics({ processMetrics: false });
    for (let i = 0; i < MAX_USAGE_LABELS + 50; i++) m.usage(`user-${i}`, { model: `p/m-${i}`, inputTokens: 1, outputTokens: 0, cost: 0 });
    const lines = (await m.render()).split('\n').filter((l) => l.startsWith('stepd_usage_tokens_total{'));
    expect(lines.length).toBe(MAX_USAGE_LABELS + 1);
    expect(lines.some((l) => l.includes('model="other",user="other"') && l.endsWith(' 50'))).toBe(true);
  });
});
