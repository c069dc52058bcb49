import { describe, expect, it } from 'vitest';
import { renderKey, roleScopedKey, MAX_KEY_CHARS } from '../../src/flow/capacity.js';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';
import { parseRate, ratePolicy, bucketLabel } from '../../src/tools/rates.js';
import { parseConfigFile } from '../../src/configFile.js';

const tool = (more: Record<string, unknown> = {}) => ({ tool: 'core.noop', done: true, ...more });

function issuesOf(raw: unknown): { path: string; message: string }[] {
  return validateFlow(raw);
}

describe('keyed concurrency in flow JSON', () => {
  it('compiles { key, limit } on a tool step and on the flow', () => {
    const r = compileFlow({ start: 'a', concurrency: { key: 'repo-{{input.repo}}', limit: 1 }, steps: { a: tool({ concurrency: { key: '{{input.account}}', limit: 2 } }) } });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.flow.concurrency).toEqual({ key: 'repo-{{input.repo}}', limit: 1 });
    expect(r.flow.steps.get('a')!.concurrency).toEqual({ key: '{{input.account}}', limit: 2 });
  });

  it('names the mix-up: a number on a tool step or the flow, an object on a fork step', () => {
    expect(issuesOf({ start: 'a', steps: { a: tool({ concurrency: 3 }) } })).toEqual([
      { path: 'steps.a.concurrency', message: expect.stringMatching(/on a tool step concurrency is \{ "key": "TEMPLATE", "limit": N \}; a number only applies to a fork step/) },
    ]);
    expect(issuesOf({ start: 'a', concurrency: 2, steps: { a: tool() } })).toEqual([
      { path: 'concurrency', message: expect.stringMatching(/a flow's concurrency is \{ "key"/) },
    ]);
    const fork = { start: 'f', steps: { f: { parallel: ['a', 'b'], join: 'j', concurrency: { key: 'x', limit: 1 } }, a: tool({ done: undefined }), b: tool({ done: undefined }), j: tool() } };
    expect(issuesOf(fork)).toContainEqual({ path: 'steps.f.concurrency', message: expect.stringMatching(/on a fork step "concurrency" is a number/) });
  });

  it('refuses malformed keys and limits, and concurrency on gates and timers', () => {
    expect(issuesOf({ start: 'a', steps: { a: tool({ concurrency: { key: '', limit: 1 } }) } })[0]!.message).toMatch(/concurrency.key must be a non-empty string/);
    expect(issuesOf({ start: 'a', steps: { a: tool({ concurrency: { key: 'k', limit: 0 } }) } })[0]!.message).toMatch(/concurrency.limit must be a whole number/);
    expect(issuesOf({ start: 'a', steps: { a: tool({ concurrency: { key: 'k', limit: 1, per: 'x' } }) } })[0]!.message).toMatch(/unknown field\(s\) "per"/);
    expect(issuesOf({ start: 'a', steps: { a: { wait: '1s', concurrency: { key: 'k', limit: 1 }, next: 'b' }, b: tool() } })[0]!.message).toMatch(/applies to tool steps/);
  });

  it('says where priority and rate limits live when a flow names them', () => {
    const issues = issuesOf({ start: 'a', priority: 5, steps: { a: tool({ rateLimit: '5/s' }) } });
    expect(issues).toContainEqual({ path: '', message: expect.stringMatching(/"priority": priority is set on the workflow row/) });
    expect(issues).toContainEqual({ path: 'steps.a', message: expect.stringMatching(/"rateLimit": rate limits are set in the config/) });
  });

  it('renders a key from the scope: strings as they are, other values as JSON, cut to MAX_KEY_CHARS', () => {
    expect(renderKey('acct-{{input.a}}', { input: { a: 7 } })).toBe('acct-7');
    expect(renderKey('{{input.a}}', { input: { a: { x: 1 } } })).toBe('{"x":1}');
    expect(renderKey('{{input.a}}', { input: { a: 'y'.repeat(500) } })).toHaveLength(MAX_KEY_CHARS);
  });

  it('counts a key value per role: the role, percent-encoded, before it (no role: an empty one)', () => {
    expect(roleScopedKey('billing', 'acct-7')).toBe('billing/acct-7');
    expect(roleScopedKey(null, 'acct-7')).toBe('/acct-7');
    // A role name cannot be made to look like another role's key: its `/` is encoded.
    expect(roleScopedKey('a/b', 'c')).toBe('a%2Fb/c');
    expect(roleScopedKey('a', 'b/c')).not.toBe(roleScopedKey('a/b', 'c'));
  });
});

describe('rate limits', () => {
  it('reads "N/period" forms and refuses others', () => {
    expect(parseRate('50/s')).toEqual({ count: 50, periodMs: 1000 });
    expect(parseRate('60/m')).toEqual({ count: 60, periodMs: 60_000 });
    expect(parseRate('5/10s')).toEqual({ count: 5, periodMs: 10_000 });
    expect(parseRate('1000/h')).toEqual({ count: 1000, periodMs: 3_600_000 });
    for (const bad of ['50', 'fast', '0/s', '1.5/s', '10/d']) expect(parseRate(bad)).toHaveProperty('error');
  });

  it('names the buckets a step takes from: per pattern, per user, per key', () => {
    const p = ratePolicy({ 'http.request': '50/s', 'llm.*': { rate: '60/m', per: 'user' }, 'llm.chat': { rate: '10/s', per: 'key', burst: 5 } });
    expect(p.bucketsFor('http.request', 'ann', undefined)).toEqual(['50|1000|1|http.request']);
    const llm = p.bucketsFor('llm.chat', 'ann', 'acct-1');
    expect(llm).toHaveLength(2);
    expect(llm.map((b) => bucketLabel(b.split('|').slice(3).join('|')))).toEqual(['llm.* user=ann', 'llm.chat key=acct-1']);
    expect(llm[1]!.startsWith('10|1000|5|')).toBe(true);
    expect(p.bucketsFor('core.echo', 'ann', undefined)).toEqual([]);
  });

  it('is part of the config file, with clients.ROLE.maxPriority', () => {
    const ok = parseConfigFile({ limits: { rates: { 'llm.*': { rate: '60/m', per: 'user' } } }, clients: { svc: { maxPriority: 10 } } }, {});
    expect(ok.clients?.svc?.maxPriority).toBe(10);
    expect(() => parseConfigFile({ limits: { rates: { 'llm.*': '60 per minute' } } }, {})).toThrow(/limits.rates\["llm.\*"\]|must look like/);
  });
});
