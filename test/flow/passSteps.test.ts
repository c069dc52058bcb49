/**
 * In the steps form only `approval` makes a gate: a step with no tool, approval, wait or fan-out
 * is a pass step that moves on at once (ending the workflow when it says `done`). The seed's flat
 * form keeps its meaning: a step without a tool is a gate. `done.error` is a message or {code, message}.
 */
import { describe, expect, it } from 'vitest';
import type { CompiledFlow } from '../../src/flow/compiled.js';
import { resolveSuccess } from '../../src/flow/transitions.js';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';

function compile(raw: unknown): CompiledFlow {
  const result = compileFlow(raw);
  if (!result.ok) throw new Error(`invalid test flow: ${JSON.stringify(result.issues)}`);
  return result.flow;
}

const scope = { input: {}, steps: {}, workflow: { id: '1', name: 't' }, result: null };

describe('steps without a tool', () => {
  it('a step with done: failed and no approval is a pass step that fails the workflow, not a gate', () => {
    const f = compile({ start: 'check', steps: { check: { tool: 'core.noop', next: 'stop' }, stop: { done: { status: 'failed', error: 'no budget left' } } } });
    expect(f.steps.get('stop')!.kind).toBe('pass');
    expect(f.steps.get('stop')!.approval).toBeUndefined();
    expect(resolveSuccess(f, 'stop', scope)).toEqual({ kind: 'failWorkflow', error: { code: 'failed_by_flow', message: 'no budget left', step: 'stop' } });
  });

  it('done.error may be {code, message}: the workflow fails with that code', () => {
    const f = compile({ start: 'stop', steps: { stop: { done: { status: 'failed', error: { code: 'over_budget', message: 'no budget left' } } } } });
    expect(resolveSuccess(f, 'stop', scope)).toEqual({ kind: 'failWorkflow', error: { code: 'over_budget', message: 'no budget left', step: 'stop' } });
  });

  it('only approval makes a gate in the steps form; next, done: true and no transition pass through', () => {
    const f = compile({
      start: 'route',
      steps: { route: { next: 'ask' }, ask: { approval: true, next: 'end' }, end: { done: true, output: { ok: true } } },
    });
    expect([...f.steps.values()].map((s) => [s.name, s.kind])).toEqual([['route', 'pass'], ['ask', 'gate'], ['end', 'pass']]);
    expect(resolveSuccess(f, 'end', scope)).toEqual({ kind: 'complete', output: { ok: true } });
  });

  it('in the seed flat form a step without a tool is still a gate', () => {
    const f = compile({ start: { name: 'request_approval', tool: null, args: {}, next: 'go' }, go: { name: 'go', tool: 'core.noop', args: {} } });
    expect(f.steps.get('request_approval')!.kind).toBe('gate');
  });

  it('a pass step has no retry', () => {
    expect(validateFlow({ start: 'a', steps: { a: { next: 'b', retry: { maxAttempts: 2 } }, b: { tool: 'core.noop' } } })).toEqual([
      { path: 'steps.a.retry', message: 'retry only applies to tool steps and gates' },
    ]);
  });
});

describe('done of the wrong type says what it expects', () => {
  const issuesOf = (done: unknown) => validateFlow({ start: 'a', steps: { a: { done } } });

  it.each([
    [{ status: 'failed', error: 5 }, 'steps.a.done.error', 'done.error must be a message (a non-empty string) or {"code": "…", "message": "…"} (got number 5)'],
    [{ status: 'failed', error: { code: 'x' } }, 'steps.a.done.error', 'done.error must be a message (a non-empty string) or {"code": "…", "message": "…"} (got an object with "code")'],
    [{ status: 'failed', error: '' }, 'steps.a.done.error', 'done.error must be a message (a non-empty string) or {"code": "…", "message": "…"} (got string "")'],
    [{ status: 'nope' }, 'steps.a.done.status', 'done.status must be "completed" or "failed" (got string "nope")'],
    [{ status: 'completed', error: 'x' }, 'steps.a.done.error', 'done takes no "error" when it completes (an error goes with "status": "failed")'],
    ['yes', 'steps.a.done', 'done must be true, {"status": "completed"} or {"status": "failed", "error": …} (got string "yes")'],
  ])('done: %j', (done, path, message) => {
    expect(issuesOf(done)).toEqual([{ path, message }]);
  });
});

describe('a flow stored as a JSON string', () => {
  it('says a string that is not a flow is a string, not that it is not valid JSON', () => {
    expect(validateFlow('hello world')).toEqual([{ path: '', message: 'flow must be a JSON object, but it is a string, not a flow: "hello world"' }]);
    const long = validateFlow(`🙂${'x'.repeat(100)}`)[0]!.message;
    expect(long).toMatch(/it is a string, not a flow: "🙂x{59}"…$/);
  });

  it('says JSON text holding something other than an object is not a flow object', () => {
    expect(validateFlow('[1, 2]')).toEqual([{ path: '', message: 'flow must be a JSON object' }]);
    expect(validateFlow('{"start": ')[0]!.message).toMatch(/^flow is JSON text that is not valid JSON: /);
  });
});
