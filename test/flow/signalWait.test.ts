import { describe, expect, it } from 'vitest';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';
import { getStep } from '../../src/flow/compiled.js';
import { resolveSignalWait } from '../../src/flow/signalWait.js';
import { StepError } from '../../src/errors.js';

const flow = (steps: Record<string, unknown>) => ({ start: Object.keys(steps)[0], steps });
const messages = (raw: unknown) => validateFlow(raw).map((i) => `${i.path}: ${i.message}`);

describe('signal steps in a flow', () => {
  it('compile as kind signal: no tool, names as a list, since "workflow" by default, the timeout in ms', () => {
    const c = compileFlow(
      flow({
        w: { signal: { name: 'payment.received', key: '{{input.orderId}}', timeout: '24h' }, branch: [{ if: 'result.name == "payment.received"', then: 'ship' }], default: 'ship', onError: 'late' },
        ship: { tool: 'core.noop', done: true },
        late: { done: true },
      }),
    );
    expect(c.ok, JSON.stringify(c.issues)).toBe(true);
    if (!c.ok) return;
    const w = getStep(c.flow, 'w');
    expect(w).toMatchObject({ kind: 'signal', tool: null, signal: { names: ['payment.received'], key: '{{input.orderId}}', since: 'workflow', timeoutMs: 86_400_000 }, onError: 'late' });
    const list = compileFlow(flow({ w: { signal: { name: ['a.b', 'c.d'], since: 'step' }, done: true } }));
    expect(list.ok && getStep(list.flow, 'w').signal).toEqual({ names: ['a.b', 'c.d'], since: 'step' });
  });

  it('refuse bad names, an empty list, a bad since, a bad timeout, each with its path', () => {
    const issues = messages(
      flow({
        a: { signal: { name: '' }, next: 'b' },
        b: { signal: { name: [] }, next: 'c' },
        c: { signal: { name: ['ok', 'bad\nname'] }, next: 'd' },
        d: { signal: { name: 'x'.repeat(201) }, next: 'e' },
        e: { signal: { name: 'x', since: 'yesterday' }, next: 'f' },
        f: { signal: { name: 'x', timeout: 'soon' }, next: 'g' },
        g: { signal: { name: 'x', timeout: 0 }, next: 'h' },
        h: { signal: { name: ['x', 'x'] }, next: 'i' },
        i: { signal: { name: 'x', key: '' }, next: 'j' },
        j: { signal: { name: 'x', key: '{{nowhere.k}}' }, next: 'k' },
        k: { signal: { name: 'x', extra: 1 }, done: true },
      }),
    );
    const at = (path: string, text: RegExp) => expect(issues.some((i) => i.startsWith(`${path}:`) && text.test(i)), `${path} ${text} in ${JSON.stringify(issues)}`).toBe(true);
    at('steps.e.signal.since', /workflow|step/);
    at('steps.i.signal.key', /must not be empty/);
    at('steps.k.signal', /extra/);
    // Shape-valid steps are checked next (a flow with shape issues stops there): checked on their own.
    const one = (step: unknown) => messages(flow({ s: step }));
    expect(one({ signal: { name: '' }, done: true })).toEqual(['steps.s.signal.name: a signal name must not be empty']);
    expect(one({ signal: { name: [] }, done: true })).toEqual(['steps.s.signal.name: signal.name must name at least one signal']);
    expect(one({ signal: { name: ['ok', 'bad\nname'] }, done: true })).toEqual(['steps.s.signal.name[1]: a signal name must not contain control characters']);
    expect(one({ signal: { name: 'x'.repeat(201) }, done: true })).toEqual(['steps.s.signal.name: a signal name is at most 200 bytes (got 201)']);
    expect(one({ signal: { name: 'x', timeout: 'soon' }, done: true })[0]).toMatch(/^steps\.s\.signal\.timeout: invalid duration "soon"/);
    expect(one({ signal: { name: 'x', timeout: 0 }, done: true })).toEqual(['steps.s.signal.timeout: signal.timeout must be greater than zero']);
    expect(one({ signal: { name: ['x', 'x'] }, done: true })).toEqual(['steps.s.signal.name: a signal name is listed twice']);
    expect(one({ signal: { name: 'x', key: '{{nowhere.k}}' }, done: true })[0]).toMatch(/^steps\.s\.signal\.key: unknown template root "nowhere"/);
    expect(one({ signal: { name: 'x', key: 'bad\tkey' }, done: true })).toEqual(['steps.s.signal.key: a signal key must not contain control characters']);
  });

  it('refuse what a signal wait cannot also be', () => {
    const issues = validateFlow(
      flow({
        a: { signal: { name: 'x' }, tool: 'core.noop', next: 'b' },
        b: { signal: { name: 'x' }, approval: true, next: 'c' },
        c: { signal: { name: 'x' }, wait: '1s', next: 'd' },
        d: { signal: { name: 'x' }, timeout: '5s', next: 'e' },
        e: { signal: { name: 'x' }, retry: { maxAttempts: 2 }, next: 'f' },
        f: { signal: { name: 'x' }, parallel: ['a'] },
      }),
    );
    expect(issues.map((i) => i.path)).toEqual(expect.arrayContaining(['steps.a.signal', 'steps.b.approval', 'steps.c.wait', 'steps.d.timeout', 'steps.e.retry', 'steps.f.signal']));
    expect(issues.find((i) => i.path === 'steps.d.timeout')!.message).toMatch(/goes inside it/);
  });

  it('resolve the key template when the wait begins; a key that is no text, empty or too long fails the step', () => {
    const c = compileFlow(flow({ w: { signal: { name: 'p', key: '{{input.k}}' }, done: true } }));
    if (!c.ok) throw new Error(JSON.stringify(c.issues));
    const w = getStep(c.flow, 'w');
    const scope = (k: unknown) => ({ input: { k }, steps: {}, workflow: { id: '1', name: 'x' } }) as never;
    expect(resolveSignalWait(w, scope('order-1'))).toEqual({ names: ['p'], key: 'order-1', since: 'workflow' });
    expect(resolveSignalWait(w, scope(42))).toMatchObject({ key: '42' });
    for (const bad of [null, { a: 1 }, 'k'.repeat(501)]) {
      let err: unknown;
      try {
        resolveSignalWait(w, scope(bad));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(StepError);
      expect((err as StepError).code).toMatch(/invalid_signal_key|template_error/);
      expect((err as StepError).retryable).toBe(false);
    }
  });
});
