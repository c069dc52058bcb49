import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import { createPermissionPolicy } from '../../src/tools/permissions.js';
import { matchesToolPattern } from '../../src/tools/matchesToolPattern.js';

describe('permissions', () => {
  it('allows everything without a permissions section', () => {
    const policy = createPermissionPolicy(undefined);
    expect(policy.allowsEverything).toBe(true);
    expect(() => policy.check(null, 'kb.delete')).not.toThrow();
  });

  it('lets a user call the default patterns plus their own', () => {
    const policy = createPermissionPolicy({ default: ['core.*'], users: { james: ['kb.*', 'http.request'] } });
    expect(policy.allowsEverything).toBe(false);
    expect(policy.allows('james', 'kb.search')).toBe(true);
    expect(policy.allows('james', 'http.request')).toBe(true);
    expect(policy.allows('james', 'core.echo')).toBe(true);
    expect(policy.allows('ann', 'core.echo')).toBe(true);
    expect(policy.allows(null, 'core.noop')).toBe(true);
    expect(policy.allows('ann', 'kb.search')).toBe(false);
    expect(policy.allows('james', 'kbx.search')).toBe(false);
    expect(policy.allows('james', 'http.requests')).toBe(false);
  });

  it('denies with a non-retryable permission_denied naming the user and the tool', () => {
    const policy = createPermissionPolicy({ users: { james: ['kb.*'] } });
    let error: unknown;
    try {
      policy.check('ann', 'kb.search');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(StepError);
    expect(error).toMatchObject({ code: 'permission_denied', retryable: false, details: { user: 'ann', tool: 'kb.search' } });
    expect((error as Error).message).toMatch(/"ann".*"kb\.search"/);
  });

  it('says which MCP servers a user may call some tool of (list_tools asks no other)', () => {
    const policy = createPermissionPolicy({ default: ['core.*'], users: { james: ['kb.search', 'llm.sum*'], ann: ['k*'], root: ['*'] } });
    expect(['kb', 'llm', 'kbx', 'core', 'search'].map((p) => policy.allowsSomeToolOf('james', p))).toEqual([true, true, false, true, false]);
    expect(['kb', 'kbx', 'llm'].map((p) => policy.allowsSomeToolOf('ann', p))).toEqual([true, true, false]);
    expect(policy.allowsSomeToolOf('root', 'anything')).toBe(true);
    expect(policy.allowsSomeToolOf(null, 'kb')).toBe(false);
    expect(createPermissionPolicy(undefined).allowsSomeToolOf('x', 'kb')).toBe(true);
  });

  it('treats an empty permissions section as deny-all and "*" as allow-all', () => {
    expect(createPermissionPolicy({}).allows('james', 'core.echo')).toBe(false);
    const open = createPermissionPolicy({ default: ['*'] });
    expect(open.allowsEverything).toBe(true);
    expect(open.allows('x', 'kb.search')).toBe(true);
  });

  it('matches exact names, prefixes and the wildcard', () => {
    expect(matchesToolPattern('kb.*', 'kb.search')).toBe(true);
    expect(matchesToolPattern('kb.*', 'kb')).toBe(false);
    expect(matchesToolPattern('llm.sum*', 'llm.summarize')).toBe(true);
    expect(matchesToolPattern('*', 'anything.at_all')).toBe(true);
    expect(matchesToolPattern('kb.search', 'kb.search2')).toBe(false);
  });
});
