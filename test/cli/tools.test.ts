/** `stepd tools`: says where its configuration came from, or that none was found. */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from './helpers.js';

describe('stepd tools', () => {
  it('says no stepd.config.json was found and lists the built-ins, keeping --json output one JSON document', async () => {
    const cwd = await tempDir();
    const text = await runCli(['tools'], { cwd });
    expect(text.code).toBe(0);
    expect(text.stderr).toContain(`no stepd.config.json found in ${cwd}; showing the built-in tools only (use --config PATH)`);
    expect(text.stdout).toMatch(/^core\.echo/m);

    const json = await runCli(['tools', '--json'], { cwd });
    expect(json.code).toBe(0);
    expect(json.stderr).toContain('no stepd.config.json found');
    const parsed = JSON.parse(json.stdout) as { config: string | null; tools: { name: string }[] };
    expect(parsed.config).toBeNull();
    expect(parsed.tools.map((t) => t.name)).toContain('core.echo');
  });

  it('names the configuration file it read and says nothing about a missing one', async () => {
    const cwd = await tempDir();
    await writeFile(path.join(cwd, 'stepd.config.json'), '{}');
    const found = await runCli(['tools', '--json'], { cwd });
    expect(found.code).toBe(0);
    expect(found.stderr).not.toContain('no stepd.config.json');
    expect((JSON.parse(found.stdout) as { config: string }).config).toBe(path.join(cwd, 'stepd.config.json'));

    const explicit = await runCli(['tools', '--config', path.join(cwd, 'stepd.config.json')], { cwd: await tempDir() });
    expect(explicit.code).toBe(0);
    expect(explicit.stderr).not.toContain('no stepd.config.json');
  });
});
