/**
 * Every flow in docs/flow-language.md's "Patterns" section, run exactly as printed there: each
 * ```json block is preceded by a `<!-- pattern: {input, signal?, expect} -->` line that says
 * what to run it with, which signal to send (as `stepd signal NAME --key K` would), and its output.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateFlow } from '../../src/flow/validate.js';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

interface Pattern {
  title: string;
  flow: unknown;
  run: { input: unknown; signal?: { name: string; key?: string }; expect: { output: unknown } };
}

function patterns(): Pattern[] {
  const doc = readFileSync(new URL('../../docs/flow-language.md', import.meta.url), 'utf8');
  const start = doc.indexOf('\n## Patterns\n');
  const end = doc.indexOf('\n## ', start + 5);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const out: Pattern[] = [];
  let title = '';
  const lines = section.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('### ')) title = line.slice(4);
    const m = /^<!-- pattern: (.*) -->$/.exec(line);
    if (!m) continue;
    expect(lines[i + 1], `the pattern comment under "${title}" is followed by a json block`).toBe('```json');
    const close = lines.indexOf('```', i + 2);
    out.push({ title, run: JSON.parse(m[1]!), flow: JSON.parse(lines.slice(i + 2, close).join('\n')) });
  }
  return out;
}

const all = patterns();

async function sendSignalWhenWaiting(t: TestSchema, id: string, signal: { name: string; key?: string }): Promise<void> {
  // As `stepd signal NAME --key K` once the workflow waits (a signal sent before would match too).
  await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'pending' AND tool IS NULL`, [id])).length > 0 || undefined, 'the signal wait');
  await t.q(`INSERT INTO stepd.signals (name, key, payload) VALUES ($1, $2, '{}')`, [signal.name, signal.key ?? null]);
}

describe('docs/flow-language.md, Patterns', () => {
  it('documents every pattern the issue lists', () => {
    const titles = all.map((p) => p.title).join(' | ');
    for (const name of ['Discriminator', 'N-of-M join', 'Multi-choice', 'Interleaved routing', 'Cancel task', 'Cancel region', 'Cancel multiple instances', 'Complete multiple-instance activity', 'Deferred choice']) {
      expect(titles).toContain(name);
    }
  });

  it.each(all.map((p) => [p.title, p] as const))('%s: validates and runs as documented', async (_title, p) => {
    expect(validateFlow(p.flow)).toEqual([]);
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, p.flow, p.run.input);
    if (p.run.signal) await sendSignalWhenWaiting(t, id, p.run.signal);
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toBeNull();
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual(p.run.expect.output);
  });
});
