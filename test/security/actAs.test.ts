import { describe, expect, it } from 'vitest';
import { decideActingUser, matchesUserPattern } from '../../src/security/actAs.js';

describe('which users a database role may start workflows as', () => {
  it('matches * as any run of characters and everything else literally', () => {
    expect(matchesUserPattern('*', 'anyone')).toBe(true);
    expect(matchesUserPattern('team-*', 'team-a')).toBe(true);
    expect(matchesUserPattern('team-*', 'team')).toBe(false);
    expect(matchesUserPattern('*@example.com', 'a@example.com')).toBe(true);
    expect(matchesUserPattern('*@example.com', 'a@example.com.evil')).toBe(false);
    expect(matchesUserPattern('a*b*c', 'abc')).toBe(true);
    expect(matchesUserPattern('a*b*c', 'ac')).toBe(false);
    expect(matchesUserPattern('a*a', 'a')).toBe(false);
    expect(matchesUserPattern('.+', 'aaa')).toBe(false);
  });

  it('lets a role without an entry act only as itself, a null created_by being its own name', () => {
    expect(decideActingUser({ role: 'app', trusted: false, createdBy: null }, undefined)).toEqual({ ok: true, user: 'app' });
    expect(decideActingUser({ role: 'app', trusted: false, createdBy: 'app' }, undefined)).toEqual({ ok: true, user: 'app' });
    const refused = decideActingUser({ role: 'app', trusted: false, createdBy: 'admin' }, undefined);
    expect(refused).toMatchObject({ ok: false, details: { role: 'app', user: 'admin' } });
    expect(refused.ok === false && refused.message).toMatch(/role "app" may not start workflows as user "admin"/);
  });

  it('lets a role act as the users its actAs patterns match, and no others', () => {
    const clients = { app: { actAs: ['customer-*'] } };
    expect(decideActingUser({ role: 'app', trusted: false, createdBy: 'customer-7' }, clients)).toEqual({ ok: true, user: 'customer-7' });
    expect(decideActingUser({ role: 'app', trusted: false, createdBy: 'admin' }, clients).ok).toBe(false);
    expect(decideActingUser({ role: 'other', trusted: false, createdBy: 'customer-7' }, clients).ok).toBe(false);
  });

  it('lets trusted roles and the executor’s own rows act as anyone, without a user too', () => {
    expect(decideActingUser({ role: 'postgres', trusted: true, createdBy: 'admin' }, undefined)).toEqual({ ok: true, user: 'admin' });
    expect(decideActingUser({ role: 'postgres', trusted: true, createdBy: null }, undefined)).toEqual({ ok: true, user: null });
    expect(decideActingUser({ role: null, trusted: false, createdBy: 'x' }, undefined)).toEqual({ ok: true, user: 'x' });
  });
});
