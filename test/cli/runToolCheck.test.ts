/**
 * `stepd run` refuses what `stepd validate` refuses before inserting anything: an unknown tool
 * (issue 26: `core.ehco` was stored and failed at run time) and a literal argument its input
 * schema refuses, for a flow file and for a registered flow. The same check, shared
 * (src/tools/flowToolCheck.ts). Built CLI, real database.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { envFor, runCli, writeJson } from './helpers.js';

const TYPO = { start: 'say', steps: { say: { tool: 'core.ehco', args: { hi: 1 } } } };
const BAD_ARGS = { start: 'nap', steps: { nap: { tool: 'core.sleep', args: { ms: 'soon' } } } };
const MCP_TOOL = { start: 'look', steps: { look: { tool: 'kb.search', args: { q: 'x' } } } };

describe('stepd run checks tools as stepd validate does', () => {
  it('refuses an unknown built-in tool and bad literal arguments, with the same issues as validate; nothing is stored', async () => {
    const t = await createTestSchema();
    const env = envFor(t);
    for (const flow of [TYPO, BAD_ARGS]) {
      const file = await writeJson(flow);
      const run = await runCli(['run', file], { env });
      const validate = await runCli(['validate', file, '--json'], { env });
      expect(run.code).toBe(1);
      expect(validate.code).toBe(1);
      const issues = (JSON.parse(validate.stdout) as { issues: { path: string; message: string }[] }[])[0]!.issues;
      expect(issues.length).toBeGreaterThan(0);
      for (const i of issues) expect(run.stderr).toContain(`${i.path}: ${i.message}`);
      expect(run.stderr).toContain('nothing was started');
    }
    expect(await t.q(`SELECT id FROM stepd.workflows`)).toEqual([]);
  });

  it('refuses a registered flow with an unknown tool', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('typo', $1)`, [JSON.stringify(TYPO)]);
    const run = await runCli(['run', 'typo'], { env: envFor(t) });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('flow typo@1 is not a valid flow');
    expect(run.stderr).toContain('unknown tool "core.ehco"');
    expect(await t.q(`SELECT id FROM stepd.workflows`)).toEqual([]);
  });

  it('an MCP server the configuration does not name is refused; without a configuration its tools are left to run time', async () => {
    const t = await createTestSchema();
    const env = envFor(t);
    const file = await writeJson(MCP_TOOL);
    const config = await writeJson({ mcpServers: {} }, 'stepd.config.json');
    const refused = await runCli(['run', file, '--config', config], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('unknown tool "kb.search": there is no MCP server "kb" in the configuration');
    const stored = await runCli(['run', file], { env });
    expect(stored.code, stored.stderr).toBe(0);
    expect(await t.q(`SELECT name FROM stepd.workflows`)).toHaveLength(1);
  });
});
