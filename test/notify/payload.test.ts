/** The pure parts of notifications: which steps are gates, who links act as, and the signature. */
import { describe, expect, it } from 'vitest';
import { gateOf, linkUsers } from '../../src/notify/notificationPayload.js';
import { signBody, verifySignature } from '../../src/notify/signature.js';

describe('gateOf', () => {
  it('finds gates in either flow form and nothing else', () => {
    const steps = {
      start: 'g',
      steps: {
        g: { approval: { message: 'Ship?', approvers: ['carol', 'ops-*'], links: true, schema: { type: 'object' } }, next: 'w' },
        w: { signal: { name: 'paid' }, next: 's' },
        s: { workflow: { name: 'child' }, next: 't' },
        t: { tool: 'core.echo', args: {} },
      },
    };
    expect(gateOf(steps, 'g')).toEqual({ message: 'Ship?', approvers: ['carol', 'ops-*'], links: true, schema: { type: 'object' } });
    for (const name of ['w', 's', 't', 'missing']) expect(gateOf(steps, name)).toBeUndefined();
    const flat = { start: { name: 'draft', tool: 'core.echo', args: {}, next: 'ok' }, ok: { name: 'ok', tool: null, description: 'Publish it?', done: true } };
    expect(gateOf(flat, 'ok')).toEqual({ message: 'Publish it?', links: false });
    expect(gateOf(flat, 'draft')).toBeUndefined();
  });

  it('links act as each approver named literally, or the workflow user without approvers', () => {
    expect(linkUsers({ approvers: ['carol', 'ops-*', 'carol', 'dave'], links: true }, 'alice')).toEqual(['carol', 'dave']);
    expect(linkUsers({ approvers: ['*'], links: true }, 'alice')).toEqual([]);
    expect(linkUsers({ links: true }, 'alice')).toEqual(['alice']);
    expect(linkUsers({ links: true }, null)).toEqual([]);
  });
});

describe('webhook signature', () => {
  const secret = 'a-secret-of-some-length';
  const at = new Date('2026-11-27T12:00:00Z');
  it('verifies its own signature and refuses a changed body, another secret, an old one and garbage', () => {
    const body = '{"type":"workflow.failed"}';
    const header = signBody(secret, body, at);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySignature(secret, body, header, { now: at })).toBe(true);
    expect(verifySignature(secret, body.replace('failed', 'completed'), header, { now: at })).toBe(false);
    expect(verifySignature('another-secret-entirely', body, header, { now: at })).toBe(false);
    expect(verifySignature(secret, body, header, { now: new Date(at.getTime() + 3_600_000) })).toBe(false);
    for (const bad of [undefined, '', 't=1', 'v1=00', `t=${Math.floor(at.getTime() / 1000)},v1=zz`]) expect(verifySignature(secret, body, bad, { now: at })).toBe(false);
  });
});
