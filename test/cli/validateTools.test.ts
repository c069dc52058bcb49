/**
 * `stepd validate` checks the tools a flow calls: built-ins always, MCP tools against the servers
 * of the configuration (the test servers, over stdio and Streamable HTTP), and the literal parts
 * of each step's arguments against the tool's input schema.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { stdioServerFixture } from '../mcp-servers/fixtures.js';
import { startHttpMcpServer, type HttpMcpServer } from '../mcp-servers/http-server.js';
import { runCli, tempDir, writeJson } from './helpers.js';

type Issue = { path: string; message: string };
type Result = { file: string; valid: boolean; issues: Issue[]; warnings: Issue[] };

function flowOf(steps: Record<string, Record<string, unknown>>): unknown {
  const names = Object.keys(steps);
  const linked = Object.fromEntries(names.map((n, i) => [n, i + 1 < names.length ? { ...steps[n], next: names[i + 1] } : { ...steps[n], done: true }]));
  return { start: names[0], steps: linked };
}

async function folderWithConfig(config: unknown): Promise<string> {
  const cwd = await tempDir();
  await writeFile(path.join(cwd, 'stepd.config.json'), JSON.stringify(config));
  return cwd;
}

async function validateJson(args: string[], cwd: string): Promise<{ code: number | null; results: Result[]; stderr: string }> {
  const r = await runCli(['validate', ...args, '--json'], { cwd });
  return { code: r.code, results: JSON.parse(r.stdout) as Result[], stderr: r.stderr };
}

const servers: HttpMcpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('stepd validate: tools', () => {
  it('refuses an unknown built-in tool and literal arguments the built-in schema refuses, without a config', async () => {
    const cwd = await tempDir();
    const file = await writeJson(
      flowOf({
        typo: { tool: 'core.ehco' },
        nap: { tool: 'core.sleep' },
        get: { tool: 'http.request', args: { url: '{{input.url}}', method: 5, retries: 2 } },
        kb: { tool: 'kb.search', args: { q: 'x' } },
      }),
    );
    const { code, results, stderr } = await validateJson([file], cwd);
    expect(code).toBe(1);
    const issues = results[0]!.issues;
    expect(issues).toContainEqual({ path: 'steps.typo.tool', message: expect.stringMatching(/unknown tool "core\.ehco": .*core\.echo/) });
    expect(issues).toContainEqual({ path: 'steps.nap.args', message: 'missing argument "ms", which core.sleep requires' });
    expect(issues).toContainEqual({ path: 'steps.get.args.method', message: expect.stringContaining('must be string') });
    expect(issues).toContainEqual({ path: 'steps.get.args.retries', message: expect.stringContaining('takes no argument "retries"') });
    // The templated url is not judged, and an MCP tool cannot be checked without a config: a note says so.
    expect(issues.some((i) => i.path.startsWith('steps.get.args.url') || i.path.startsWith('steps.kb'))).toBe(false);
    expect(stderr).toContain('MCP tools not checked because no stepd.config.json was found (use --config PATH): kb.search');
  });

  it('checks MCP tool names and literal arguments against a stdio server of the config found in the folder', async () => {
    const server = stdioServerFixture();
    const cwd = await folderWithConfig({ mcpServers: { t: server.config } });
    const bad = await writeJson(
      flowOf({
        nap: { tool: 't.sleep', args: { ms: 'soon' } },
        typo: { tool: 't.ech' },
        other: { tool: 'kb.search' },
        say: { tool: 't.text', args: { parts: ['a', 7, '{{input.x}}'] } },
      }),
    );
    const good = await writeJson(
      flowOf({
        nap: { tool: 't.sleep', args: { ms: '{{input.ms}}' } },
        say: { tool: 't.text', args: { parts: ['a', '{{input.x}}'] } },
        echo: { tool: 't.echo', args: '{{input}}' },
      }),
      'good.json',
    );
    const { code, results } = await validateJson([bad, good], cwd);
    expect(code).toBe(1);
    const [badResult, goodResult] = results;
    expect(badResult!.valid).toBe(false);
    expect(badResult!.issues).toEqual(
      expect.arrayContaining([
        { path: 'steps.nap.args.ms', message: 'must be number (input schema of t.sleep)' },
        { path: 'steps.typo.tool', message: expect.stringMatching(/^unknown tool "t\.ech": MCP server "t" has .*t\.echo/) },
        { path: 'steps.other.tool', message: expect.stringContaining('there is no MCP server "kb" in the configuration (its servers: t') },
        { path: 'steps.say.args.parts[1]', message: 'must be string (input schema of t.text)' },
      ]),
    );
    expect(badResult!.issues).toHaveLength(4);
    expect(goodResult).toMatchObject({ valid: true, issues: [], warnings: [] });

    const text = await runCli(['validate', bad], { cwd });
    expect(text.stdout).toContain('  steps.nap.args.ms: must be number (input schema of t.sleep)');
  });

  it('checks tools of a Streamable HTTP server given with --config, and connects to nothing with --offline', async () => {
    const server = await startHttpMcpServer();
    servers.push(server);
    const config = path.join(await folderWithConfig({ mcpServers: { web: { url: server.url } } }), 'stepd.config.json');
    const file = await writeJson(flowOf({ busy: { tool: 'web.concurrency', args: {} }, ok: { tool: 'web.echo', args: { any: 1 } } }));

    const checked = await validateJson([file, '--config', config], await tempDir());
    expect(checked.code).toBe(1);
    expect(checked.results[0]!.issues).toEqual([{ path: 'steps.busy.args', message: 'missing argument "ms", which web.concurrency requires' }]);
    expect(server.stats.sessionsOpened).toBeGreaterThan(0);

    const opened = server.stats.sessionsOpened;
    const offline = await validateJson([file, '--config', config, '--offline'], await tempDir());
    expect(offline.code).toBe(0);
    expect(offline.stderr).toContain('MCP tools not checked because of --offline: web.concurrency, web.echo');
    expect(server.stats.sessionsOpened).toBe(opened);
  });

  it('warns about a server that cannot be reached instead of failing, and still checks the rest', async () => {
    const port = await freePort();
    const cwd = await folderWithConfig({ mcpServers: { gone: { url: `http://127.0.0.1:${port}/mcp` }, broken: { command: '/nonexistent/stepd-test-server' } } });
    const file = await writeJson(flowOf({ a: { tool: 'gone.search', args: { q: 1 } }, b: { tool: 'broken.x' }, c: { tool: 'gone.other' }, d: { tool: 'core.noop' } }));
    const { code, results } = await validateJson([file], cwd);
    expect(code).toBe(0);
    expect(results[0]!.valid).toBe(true);
    expect(results[0]!.warnings).toEqual([
      { path: 'steps.a.tool', message: expect.stringMatching(/^MCP server "gone" could not be reached.*; its tools and their arguments were not checked$/) },
      { path: 'steps.b.tool', message: expect.stringMatching(/^MCP server "broken" could not be reached.*ENOENT.*not checked$/) },
    ]);

    const text = await runCli(['validate', file], { cwd });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/valid \(4 steps\), 2 warning\(s\)\n {2}warning: steps\.a\.tool: MCP server "gone" could not be reached/);
  });

  it('a broken stepd.config.json found in the folder is a note, but one named with --config is an error', async () => {
    const cwd = await folderWithConfig({ mcpServers: { kb: { command: '${STEPD_TEST_UNSET_VARIABLE}' } } });
    const file = await writeJson(flowOf({ a: { tool: 'core.ehco' } }));
    const found = await validateJson([file], cwd);
    expect(found.code).toBe(1);
    expect(found.results[0]!.issues[0]).toMatchObject({ path: 'steps.a.tool' });
    expect(found.stderr).toContain('stepd.config.json in');
    expect(found.stderr).toContain('could not be read, so the built-in caps and tools apply: invalid config file');
    expect(found.stderr).toContain('environment variable STEPD_TEST_UNSET_VARIABLE is not set');

    const named = await runCli(['validate', file, '--config', path.join(cwd, 'stepd.config.json')], { cwd });
    expect(named.code).toBe(1);
    expect(named.stdout).toBe('');
    expect(named.stderr).toContain('environment variable STEPD_TEST_UNSET_VARIABLE is not set');
  });

  it('still refuses a templated tool name and {{results}} in a join output before asking any server', async () => {
    const server = stdioServerFixture();
    const cwd = await folderWithConfig({ mcpServers: { t: server.config } });
    const file = await writeJson(flowOf({ pick: { tool: '{{input.srv}}.echo' } }));
    const join = await writeJson(
      {
        start: 'fan',
        steps: { fan: { parallel: ['x', 'y'], join: 'j' }, x: { tool: 't.echo' }, y: { tool: 't.echo' }, j: { tool: 't.echo', output: '{{results}}', done: true } },
      },
      'join.json',
    );
    const { code, results } = await validateJson([file, join], cwd);
    expect(code).toBe(1);
    expect(results[0]!.issues).toEqual([{ path: 'steps.pick.tool', message: expect.stringContaining('tool names are not templates') }]);
    expect(results[1]!.issues).toEqual([{ path: 'steps.j.output', message: expect.stringContaining('"results" (the joined fan-out\'s results) is only available in the join step\'s args') }]);
    expect(server.pids()).toEqual([]);
  });
});
