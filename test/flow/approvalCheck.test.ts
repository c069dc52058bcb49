import { describe, expect, it } from 'vitest';
import { refuseReadying, type Readying } from '../../src/flow/approvalCheck.js';
import type { CompiledStep } from '../../src/flow/compiled.js';
import { compileFlow } from '../../src/flow/validate.js';

function gate(approval: Record<string, unknown>): CompiledStep {
  const compiled = compileFlow({ start: 'g', steps: { g: { approval } } });
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
  return compiled.flow.steps.get('g')!;
}

const readying = (over: Partial<Readying> = {}): Readying => ({ result: null, readiedBy: 'ann', readiedRole: 'app', roleTrusted: false, ...over });

describe('whether a readying of a gate stands', () => {
  it('approvers: the user must match a pattern, and the role must be allowed to act as them', () => {
    const g = gate({ approvers: ['finance-*', 'app'] });
    expect(refuseReadying(g, readying({ readiedBy: 'app' }), undefined)).toBeUndefined();
    expect(refuseReadying(g, readying({ readiedBy: 'finance-ann', roleTrusted: true }), undefined)).toBeUndefined();
    expect(refuseReadying(g, readying({ readiedBy: 'finance-ann' }), { app: { actAs: ['finance-*'] } })).toBeUndefined();
    expect(refuseReadying(g, readying({ readiedBy: 'finance-ann' }), undefined)?.message).toContain('database role "app" may not act as user "finance-ann" (it has no "clients" entry');
    expect(refuseReadying(g, readying({ readiedBy: 'bob', roleTrusted: true }), undefined)?.message).toContain('user "bob" is not among the approvers');
    expect(refuseReadying(g, readying({ readiedBy: null, roleTrusted: true }), undefined)?.code).toBe('approval_refused');
    // The executor's own readying (no role) is trusted.
    expect(refuseReadying(g, readying({ readiedBy: 'finance-x', readiedRole: null }), undefined)).toBeUndefined();
  });

  it('schema: the data (or {"approved": true} when none) must match; a rejection is not checked', () => {
    const g = gate({ schema: { type: 'object', required: ['code'], properties: { code: { type: 'string' } } } });
    expect(refuseReadying(g, readying({ result: { code: 'A' } }), undefined)).toBeUndefined();
    expect(refuseReadying(g, readying({ result: null }), undefined)).toMatchObject({ issues: [{ path: 'result.code', message: 'is required' }] });
    expect(refuseReadying(g, readying({ result: { code: 3 } }), undefined)).toMatchObject({ issues: [{ path: 'result.code', message: 'must be string' }] });
    expect(refuseReadying(g, readying({ result: { approved: false, reason: 'no' } }), undefined)).toBeUndefined();
  });

  it('a gate without approvers or schema takes any readying', () => {
    expect(refuseReadying(gate({ message: 'ok?' }), readying({ readiedBy: 'anyone' }), undefined)).toBeUndefined();
  });
});
