import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfigFile, parseConfigFile } from '../../src/configFile.js';
import { ConfigError } from '../../src/errors.js';
import { Secrets } from '../../src/secrets.js';
import { tempDirSync } from '../helpers/isolation.js';

function issuesOf(fn: () => unknown): { path: string; message: string }[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('expected a ConfigError');
}

const example = {
  mcpServers: {
    kb: { command: 'node', args: ['kb-server.js'], env: { KB_TOKEN: '${KB_TOKEN}' } },
    search: { url: 'http://127.0.0.1:3001/mcp', headers: { Authorization: 'Bearer ${SEARCH_TOKEN}' } },
  },
  permissions: { default: ['core.*'], users: { james: ['kb.*', 'http.request'] } },
  limits: { concurrency: 32, tools: { 'llm.*': 10 }, users: { james: 20 } },
};

describe('config file', () => {
  it('accepts the documented example and expands ${VAR} from the environment', () => {
    const config = parseConfigFile(example, { KB_TOKEN: 'kb-secret', SEARCH_TOKEN: 's3' });
    expect(config.mcpServers?.kb).toEqual({ command: 'node', args: ['kb-server.js'], env: { KB_TOKEN: 'kb-secret' } });
    expect(config.mcpServers?.search).toEqual({ url: 'http://127.0.0.1:3001/mcp', headers: { Authorization: 'Bearer s3' } });
    expect(config.limits).toEqual(example.limits);
    expect(config.permissions).toEqual(example.permissions);
  });

  it('expands several variables inside one string and leaves other text alone', () => {
    const config = parseConfigFile({ mcpServers: { a: { command: '${BIN}/node', args: ['--x=${A}-${B}', 'plain $A'] } } }, { BIN: '/usr/bin', A: '1', B: '2' });
    expect(config.mcpServers?.a).toEqual({ command: '/usr/bin/node', args: ['--x=1-2', 'plain $A'] });
  });

  it('names the key path and the variable when a variable is missing', () => {
    const issues = issuesOf(() => parseConfigFile(example, { KB_TOKEN: 'x' }));
    expect(issues).toEqual([{ path: 'mcpServers.search.headers.Authorization', message: 'environment variable SEARCH_TOKEN is not set' }]);
  });

  it('reports wrong types and unknown keys at their paths', () => {
    const issues = issuesOf(() =>
      parseConfigFile({
        mcpServers: { kb: { command: 42, args: ['ok', 3], extra: true }, web: { url: 'ftp://x' } },
        limits: { concurrency: 0, tools: { 'llm.*': 2.5 } },
        permisions: {},
      }),
    );
    const paths = issues.map((i) => i.path).sort();
    expect(paths).toEqual(['limits.concurrency', 'limits.tools["llm.*"]', 'mcpServers.kb.args[1]', 'mcpServers.kb.command', 'mcpServers.kb.extra', 'mcpServers.web.url', 'permisions'].sort());
    expect(issues.find((i) => i.path === 'mcpServers.kb.extra')?.message).toBe('unknown key');
  });

  it('requires either command or url on a server, not both', () => {
    expect(issuesOf(() => parseConfigFile({ mcpServers: { kb: { args: [] } } }))).toEqual([
      { path: 'mcpServers.kb', message: expect.stringContaining('"command"') },
    ]);
    expect(issuesOf(() => parseConfigFile({ mcpServers: { kb: { command: 'x', url: 'http://a' } } }))[0]?.message).toMatch(/not both/);
  });

  it('refuses server names that are not identifiers or that take a built-in prefix', () => {
    const issues = issuesOf(() => parseConfigFile({ mcpServers: { core: { command: 'x' }, http: { url: 'http://a' }, 'a.b': { command: 'x' } } }));
    expect(issues.map((i) => i.path)).toEqual(['mcpServers.core', 'mcpServers.http', 'mcpServers["a.b"]']);
    expect(issues[0]?.message).toMatch(/built-in/);
  });

  it('checks tool patterns in permissions and limits', () => {
    const issues = issuesOf(() => parseConfigFile({ permissions: { default: ['kb.*', '*.x'], users: { ann: ['k*b'] } }, limits: { tools: { 'a*.b': 1 } } }));
    expect(issues.map((i) => i.path).sort()).toEqual(['limits.tools["a*.b"]', 'permissions.default[1]', 'permissions.users.ann[0]']);
  });

  it('puts the file name in the message and reports missing or broken files', async () => {
    const dir = tempDirSync('stepd-config-');
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ mcpServers: { kb: {} } }));
    await expect(loadConfigFile(bad)).rejects.toThrow(new RegExp(`${bad}[\\s\\S]*mcpServers.kb`));
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{ nope');
    await expect(loadConfigFile(broken)).rejects.toThrow(/broken\.json is not valid JSON/);
    await expect(loadConfigFile(join(dir, 'missing.json'))).rejects.toBeInstanceOf(ConfigError);
    await expect(loadConfigFile(join(dir, 'missing.json'))).rejects.toThrow(/missing\.json does not exist/);
    const good = join(dir, 'good.json');
    writeFileSync(good, JSON.stringify({ mcpServers: { kb: { command: 'node', env: { T: '${T}' } } } }));
    expect(await loadConfigFile(good, { T: 'tok' })).toEqual({ mcpServers: { kb: { command: 'node', env: { T: 'tok' } } } });
  });

  it('accepts an empty file object', () => {
    expect(parseConfigFile({})).toEqual({});
    expect(issuesOf(() => parseConfigFile([]))[0]?.path).toBe('');
  });
});

// The day-two sections: retention, notify, approvalLinks (docs/operations.md).
describe('day-two config', () => {
  it('reads retention durations, webhooks with a secret from the environment (a secret to redact), and approval links', () => {
    const secrets = new Secrets();
    const config = parseConfigFile(
      {
        retention: { completed: '30d', failed: '90d', cancelled: '12h', signals: '7d' },
        notify: [{ on: ['step.waiting', 'workflow.failed'], url: 'https://hooks.example.com/stepd', secret: '${HOOK_SECRET}' }],
        approvalLinks: { baseUrl: 'https://stepd.example.com', expiresIn: '2h' },
      },
      { HOOK_SECRET: 'a-long-hook-secret-value' },
      'stepd.config.json',
      secrets,
    );
    expect(config.retention).toEqual({ completed: 30 * 86_400_000, failed: 90 * 86_400_000, cancelled: 12 * 3_600_000, signals: 7 * 86_400_000 });
    expect(config.notify).toEqual([{ on: ['step.waiting', 'workflow.failed'], url: 'https://hooks.example.com/stepd', secret: 'a-long-hook-secret-value' }]);
    expect(config.approvalLinks).toEqual({ baseUrl: 'https://stepd.example.com', expiresIn: 7_200_000 });
    expect(secrets.redact('signed with a-long-hook-secret-value')).not.toContain('a-long-hook-secret-value');
  });

  it('names each bad key, and never quotes a secret', () => {
    const issues = issuesOf(() =>
      parseConfigFile({
        retention: { completed: 'soon', kept: '1d' },
        notify: [{ on: ['workflow.done'], url: 'ftp://x', secret: 'short' }],
        approvalLinks: { expiresIn: '100d' },
      }),
    );
    const paths = issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['retention.completed', 'retention.kept', 'notify[0].on[0]', 'notify[0].url', 'notify[0].secret', 'approvalLinks.expiresIn']));
    expect(JSON.stringify(issues)).not.toContain('"short"');
  });
});
