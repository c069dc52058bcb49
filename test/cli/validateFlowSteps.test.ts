/**
 * `stepd validate` applies caps.flowSteps (the built-in cap, or the config's) before it compiles
 * anything, as the executor and the database do.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CAPS } from '../../src/flow/caps.js';
import { runCli, tempDir, writeJson } from './helpers.js';

function chain(n: number): unknown {
  const steps: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) steps[`s${i}`] = i + 1 < n ? { tool: 'core.noop', next: `s${i + 1}` } : { tool: 'core.noop', done: true };
  return { start: 's0', steps };
}

async function issuesOf(flow: unknown, config?: unknown): Promise<{ code: number | null; issues: { path: string; message: string }[] }> {
  const cwd = await tempDir();
  if (config) await writeFile(path.join(cwd, 'stepd.config.json'), JSON.stringify(config));
  const r = await runCli(['validate', await writeJson(flow), '--json'], { cwd });
  return { code: r.code, issues: (JSON.parse(r.stdout) as { issues: { path: string; message: string }[] }[])[0]!.issues };
}

describe('stepd validate: caps.flowSteps', () => {
  it(`refuses a flow of more than the built-in ${DEFAULT_CAPS.flowSteps} steps, and the config's lower cap`, async () => {
    const over = await issuesOf(chain(DEFAULT_CAPS.flowSteps + 1));
    expect(over.code).toBe(1);
    expect(over.issues).toEqual([{ path: 'steps', message: expect.stringContaining(`caps.flowSteps (${DEFAULT_CAPS.flowSteps})`) }]);
    expect((await issuesOf(chain(DEFAULT_CAPS.flowSteps))).issues).toEqual([]);
    const configured = await issuesOf(chain(6), { caps: { flowSteps: 5 } });
    expect(configured.issues).toEqual([{ path: 'steps', message: expect.stringContaining('the flow defines 6 steps, above the operator\'s cap caps.flowSteps (5)') }]);
  });
});
