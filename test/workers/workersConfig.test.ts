/**
 * The config's `workers` section: parsed with its timeouts, refused where it clashes with a
 * built-in prefix or an MCP server, and `stepd validate` accepts the tools of a worker prefix.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { ConfigError } from '../../src/errors.js';
import { workerPrefixes } from '../../src/workers/workersConfig.js';
import { runCli, tempDir, writeJson } from '../cli/helpers.js';

function issuesOf(json: unknown): { path: string; message: string }[] {
  try {
    parseConfigFile(json, {});
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('expected a ConfigError');
}

describe('config workers', () => {
  it('parses prefixes and their timeouts', () => {
    const config = parseConfigFile({ workers: { billing: { timeout: '5m' }, pdf: {} } }, {});
    expect(workerPrefixes(config.workers)).toEqual([{ prefix: 'billing', timeoutMs: 300_000 }, { prefix: 'pdf' }]);
  });

  it('refuses a built-in prefix, an MCP server name, a bad timeout and a bad name', () => {
    expect(issuesOf({ workers: { core: {} } })).toContainEqual({ path: 'workers.core', message: expect.stringMatching(/built-in/) });
    expect(issuesOf({ mcpServers: { kb: { command: 'x' } }, workers: { kb: {} } })).toContainEqual({ path: 'workers.kb', message: expect.stringMatching(/MCP server/) });
    expect(issuesOf({ workers: { billing: { timeout: 'soon' } } }).some((i) => i.path.startsWith('workers.billing.timeout'))).toBe(true);
    expect(issuesOf({ workers: { billing: { timeout: 0 } } }).some((i) => i.path.startsWith('workers.billing.timeout'))).toBe(true);
    expect(issuesOf({ workers: { 'bil ling': {} } }).length).toBeGreaterThan(0);
    expect(issuesOf({ workers: { billing: { concurrency: 3 } } }).length).toBeGreaterThan(0);
  });

  it('stepd validate accepts any tool of a worker prefix, and still refuses an unknown prefix', async () => {
    const cwd = await tempDir();
    await writeFile(path.join(cwd, 'stepd.config.json'), JSON.stringify({ workers: { billing: { timeout: '5m' } } }));
    const file = await writeJson({ start: 'a', steps: { a: { tool: 'billing.charge', args: { amount: 3 }, next: 'b' }, b: { tool: 'pdf.render', done: true } } });
    const r = await runCli(['validate', file, '--json'], { cwd });
    const [result] = JSON.parse(r.stdout) as { issues: { path: string; message: string }[] }[];
    expect(result!.issues.map((i) => i.path)).toEqual(['steps.b.tool']);
  });
});
