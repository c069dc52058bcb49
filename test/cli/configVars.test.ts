/**
 * `${VAR}`s in the config are resolved only where a command uses them: `stepd retry` reads only
 * `caps`, `stepd prune` only `retention`, so a variable left unset for an MCP server or a webhook
 * (the daemon's business) does not stop them; one in the section they read is an error naming it.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfigSection } from '../../src/configSection.js';
import { createTestSchema } from '../helpers/db.js';
import { envFor, runCli, tempDir } from './helpers.js';

const UNSET = 'STEPD_TEST_NEVER_SET_TOKEN';

/** A folder whose stepd.config.json has `extra` beside an MCP server and a webhook that need an unset variable. */
async function folderWithConfig(extra: Record<string, unknown>): Promise<string> {
  const cwd = await tempDir();
  const config = {
    mcpServers: { kb: { command: 'kb-server', env: { KB_TOKEN: `\${${UNSET}}` } } },
    notify: [{ on: ['workflow.failed'], url: 'https://hooks.example.com/stepd', secret: `\${${UNSET}}` }],
    ...extra,
  };
  await writeFile(path.join(cwd, 'stepd.config.json'), JSON.stringify(config));
  return cwd;
}

describe('loadConfigSection', () => {
  it('resolves and checks only the section asked for', async () => {
    const cwd = await folderWithConfig({ caps: { steps: '${STEPS}' }, retention: { completed: '30d' } });
    const file = path.join(cwd, 'stepd.config.json');
    await expect(loadConfigSection(file, 'caps', { STEPS: '7' })).rejects.toThrow(/caps\.steps: /); // a number written as a string stays a string
    await expect(loadConfigSection(file, 'caps', {})).rejects.toThrow(/caps\.steps: environment variable STEPS is not set/);
    expect(await loadConfigSection(file, 'retention', {})).toEqual({ completed: 30 * 24 * 3_600_000 });
    const bare = path.join(await folderWithConfig({}), 'stepd.config.json');
    expect(await loadConfigSection(bare, 'caps', {})).toBeUndefined();
  });
});

describe('commands that need no tool', () => {
  it('stepd retry reads the caps though a variable the tools need is unset; an unset one in caps is named', async () => {
    const t = await createTestSchema();
    const ok = await runCli(['retry', '424242'], { env: envFor(t), cwd: await folderWithConfig({ caps: { steps: 10 } }) });
    expect(ok.stderr).toBe(`stepd: workflow 424242 does not exist in schema "${t.schema}" (list them with: stepd list)\n`);

    const named = await runCli(['retry', '424242'], { env: envFor(t), cwd: await folderWithConfig({ caps: { steps: `\${${UNSET}}` } }) });
    expect(named.code).toBe(1);
    expect(named.stderr).toContain(`caps.steps: environment variable ${UNSET} is not set`);
  });

  it('stepd prune reads the retention though a variable the tools need is unset', async () => {
    const t = await createTestSchema();
    const r = await runCli(['prune', '--dry-run'], { env: envFor(t), cwd: await folderWithConfig({ retention: { completed: '30d' } }) });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/dry run: 0 workflow\(s\) would be deleted/);
  });
});
