/**
 * The config's `llm` section: providers, prices and budgets checked with paths; an API key is a
 * secret however it was written; `stepd validate`'s check of the model's provider.
 */
import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { ConfigError } from '../../src/errors.js';
import { compileFlow } from '../../src/flow/validate.js';
import { silentLogger } from '../../src/logger.js';
import { Secrets } from '../../src/secrets.js';
import { checkModelProviders } from '../../src/tools/llm/checkModels.js';
import { userCostBudget } from '../../src/tools/llm/llmConfig.js';
import { buildToolbox } from '../../src/tools/toolbox.js';

function issuesOf(json: unknown): { path: string; message: string }[] {
  try {
    parseConfigFile(json, {});
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('expected a ConfigError');
}

describe('config llm', () => {
  it('reads providers with ${VAR} keys and prices, and budgets per user', () => {
    const secrets = new Secrets();
    const config = parseConfigFile(
      { llm: { providers: { main: { baseUrl: 'https://api.openai.com/v1', apiKey: '${OPENAI_API_KEY}', prices: { 'gpt-4o-mini': { input: 0.15, output: 0.6 } } } }, budgets: { default: 5, users: { james: 20 } } } },
      { OPENAI_API_KEY: 'sk-from-the-environment' },
      'stepd.config.json',
      secrets,
    );
    expect(config.llm?.providers?.main).toMatchObject({ apiKey: 'sk-from-the-environment', prices: { 'gpt-4o-mini': { input: 0.15, output: 0.6 } } });
    expect(secrets.redact('key sk-from-the-environment')).toBe('key [redacted]');
    expect(userCostBudget(config.llm, 'james')).toBe(20);
    expect(userCostBudget(config.llm, 'ann')).toBe(5);
    expect(userCostBudget(config.llm, null)).toBe(5);
    expect(userCostBudget(undefined, 'james')).toBeUndefined();
  });

  it('names each bad value by its path', () => {
    const issues = issuesOf({
      llm: { providers: { main: { baseUrl: 'ftp://x', prices: { m: { input: -1, output: 1 } } }, 'bad name': { baseUrl: 'http://x/v1' } }, budgets: { default: -2 }, extra: 1 },
    });
    const paths = issues.map((i) => i.path);
    for (const p of ['llm.providers.main.baseUrl', 'llm.providers.main.prices.m.input', 'llm.budgets.default']) expect(paths).toContain(p);
    expect(paths.some((p) => p.startsWith('llm.providers'))).toBe(true);
    expect(issuesOf({ mcpServers: { llm: { command: 'x' } } }).map((i) => i.path)).toContain('mcpServers.llm');
  });

  it('an apiKey written into the file is redacted like a ${VAR}', () => {
    const secrets = new Secrets();
    buildToolbox({ llm: { providers: { main: { baseUrl: 'http://x/v1', apiKey: 'sk-written-in-the-file' } } } }, undefined, silentLogger(), { secrets });
    expect(secrets.redact('sk-written-in-the-file')).toBe('[redacted]');
  });

  it('validate: a literal model must name a configured provider; templated ones are left to run time', () => {
    const compiled = compileFlow({
      start: 'a',
      steps: {
        a: { tool: 'llm.chat', args: { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, next: 'b' },
        b: { tool: 'llm.chat', args: { model: 'other/x', messages: [{ role: 'user', content: 'hi' }] }, next: 'c' },
        c: { tool: 'llm.chat', args: { model: '{{input.model}}', messages: [{ role: 'user', content: 'hi' }] } },
      },
    });
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    const llm = { providers: { main: { baseUrl: 'http://x/v1' } } };
    expect(checkModelProviders(compiled.flow, llm, true)).toEqual({
      issues: [{ path: 'steps.b.args.model', message: `no provider "other" in the config's llm.providers (it has main)` }],
      warnings: [],
    });
    const unread = checkModelProviders(compiled.flow, undefined, false);
    expect(unread.issues).toEqual([]);
    expect(unread.warnings.map((w) => w.path)).toEqual(['steps.a.args.model', 'steps.b.args.model']);
  });
});
