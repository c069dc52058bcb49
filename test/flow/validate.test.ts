import { describe, expect, it } from 'vitest';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';

/** A canonical flow from its steps; the first step is the start. */
function flow(steps: Record<string, unknown>, extra: Record<string, unknown> = {}): unknown {
  return { start: Object.keys(steps)[0], steps, ...extra };
}

const noop = (more: Record<string, unknown> = {}) => ({ tool: 'core.noop', ...more });

function expectOneIssue(raw: unknown, path: string, message: RegExp): void {
  const issues = validateFlow(raw);
  expect(issues, JSON.stringify(issues)).toHaveLength(1);
  expect(issues[0]!.path).toBe(path);
  expect(issues[0]!.message).toMatch(message);
}

/** DESIGN.md section 2's example, verbatim. */
const designExample = {
  start: 'search',
  timeout: '10m',
  steps: {
    search: {
      tool: 'kb.search',
      args: { query: '{{input.topic}}' },
      branch: [{ if: 'size(result.hits) == 0', then: 'give_up' }],
      default: 'approve',
    },
    approve: { approval: { timeout: '24h' }, next: 'enrich' },
    enrich: { parallel: ['by_web', 'by_kb'], join: 'merge' },
    by_web: { tool: 'http.request', args: { url: 'https://example.org/q/{{input.topic}}' } },
    by_kb: { tool: 'kb.get', args: { id: '{{steps.search.result.hits[0].id}}' } },
    merge: { tool: 'core.echo', args: { web: '{{steps.by_web.result}}', kb: '{{steps.by_kb.result}}' }, next: 'each' },
    each: { forEach: { items: '{{steps.search.result.hits}}', step: 'summarize', concurrency: 4 }, join: 'report' },
    summarize: {
      tool: 'llm.summarize',
      args: { text: '{{item.text}}' },
      retry: { maxAttempts: 5, initial: '2s', max: '30s' },
      timeout: '60s',
      onError: 'note_failure',
    },
    note_failure: { tool: 'core.echo', args: { error: '{{error.message}}' } },
    report: { tool: 'kb.add', args: { items: '{{results}}' }, done: true, output: '{{result}}' },
    give_up: { wait: '5m', next: 'search' },
  },
};

describe('a valid flow compiles', () => {
  it("compiles DESIGN.md's big example with every step kind and policy", () => {
    const result = compileFlow(designExample);
    expect(result.issues).toEqual([]);
    if (!result.ok) throw new Error('expected ok');
    const f = result.flow;
    expect(f.start).toBe('search');
    expect(f.timeoutMs).toBe(600_000);
    const kinds = Object.fromEntries([...f.steps].map(([n, s]) => [n, s.kind]));
    expect(kinds).toEqual({
      search: 'tool', approve: 'gate', enrich: 'fork', by_web: 'tool', by_kb: 'tool', merge: 'tool',
      each: 'fork', summarize: 'tool', note_failure: 'tool', report: 'tool', give_up: 'timer',
    });
    expect(f.steps.get('summarize')!.retry).toEqual({ maxAttempts: 5, maxLost: 5, initialMs: 2_000, multiplier: 2, maxMs: 30_000, jitter: true });
    expect(f.steps.get('summarize')!.onError).toBe('note_failure');
    expect(f.steps.get('summarize')!.usesItem).toBe(true);
    expect(f.steps.get('approve')!.approval).toEqual({ timeoutMs: 86_400_000, onTimeout: 'fail' });
    expect(f.steps.get('give_up')!.wait).toEqual({ ms: 300_000 });
    expect(f.steps.get('enrich')!.transition).toMatchObject({ kind: 'parallel', branches: ['by_web', 'by_kb'], join: 'merge', mode: 'failFast' });
    expect(f.steps.get('each')!.transition).toMatchObject({ kind: 'forEach', step: 'summarize', concurrency: 4, join: 'report' });
    expect(f.steps.get('merge')!.stepRefs.sort()).toEqual(['by_kb', 'by_web']);
  });

  it('compiles the seed flat form and infers a fan-out join from its branches\' join markers', () => {
    const result = compileFlow({
      start: { name: 'fan', parallel: ['a', 'b'] },
      a: { tool: 'core.noop', join: 'merge' },
      b: { tool: 'core.noop', next: 'b2' },
      b2: { tool: 'core.noop', join: 'merge' },
      merge: { tool: 'core.echo', args: { r: '{{results}}' }, done: true },
    });
    expect(result.issues).toEqual([]);
    if (result.ok) expect(result.flow.steps.get('fan')!.transition).toMatchObject({ kind: 'parallel', join: 'merge' });
  });

  it('accepts a parallel nested in a forEach whose branches read the item', () => {
    expect(
      validateFlow(
        flow({
          each: { forEach: { items: '{{input.xs}}', step: 'pair' }, join: 'end' },
          pair: { parallel: ['left', 'right'], join: 'both' },
          left: noop({ args: { x: '{{item}}' } }),
          right: noop({ args: { i: '{{index}}' } }),
          both: noop({ args: { x: '{{item}}' } }),
          end: noop({ done: true }),
        }),
      ),
    ).toEqual([]);
  });

  it('accepts loops back to an earlier step', () => {
    expect(validateFlow(flow({ a: noop({ next: 'b' }), b: noop({ branch: [{ if: 'result == nil', then: 'a' }], default: 'c' }), c: noop() }))).toEqual([]);
  });
});

describe('every validation issue has a path and a message', () => {
  it.each([
    ['next', { a: noop({ next: 'ghost' }) }, 'steps.a.next'],
    ['branch', { a: noop({ branch: [{ if: 'result == true', then: 'ghost' }] }) }, 'steps.a.branch[0].then'],
    ['default', { a: noop({ branch: [{ if: 'result == true', then: 'a' }], default: 'ghost' }) }, 'steps.a.default'],
    ['parallel', { a: { parallel: ['b', 'ghost'], join: 'b' }, b: noop() }, 'steps.a.parallel[1]'],
    ['forEach', { a: { forEach: { items: [1], step: 'ghost' } } }, 'steps.a.forEach.step'],
    ['join', { a: { parallel: ['b'], join: 'ghost' }, b: noop() }, 'steps.a.join'],
    ['onError', { a: noop({ onError: 'ghost' }) }, 'steps.a.onError'],
  ])('reports an unknown step in %s', (_kind, steps, path) => {
    const issues = validateFlow(flow(steps));
    expect(issues).toContainEqual({ path, message: expect.stringContaining('"ghost" does not exist') });
  });

  it('reports an unknown start step', () => {
    expect(validateFlow({ start: 'ghost', steps: { a: noop() } })).toContainEqual({ path: 'start', message: expect.stringContaining('"ghost"') });
  });

  it('reports two transitions on one step', () => {
    expectOneIssue(flow({ a: noop({ next: 'b', done: true }), b: noop() }), 'steps.a', /at most one transition.*next, done/);
  });

  it('reports a seed join marker together with next as two transitions', () => {
    const issues = validateFlow(flow({ f: { parallel: ['a'], join: 'j' }, a: noop({ next: 'j', join: 'j' }), j: noop() }));
    expect(issues).toContainEqual({ path: 'steps.a', message: expect.stringMatching(/at most one transition.*next, join/) });
  });

  it('reports default without branch', () => {
    expectOneIssue(flow({ a: noop({ next: 'b', default: 'b' }), b: noop() }), 'steps.a.default', /only applies to a step with "branch"/);
  });

  it('reports a condition that does not compile, at its branch', () => {
    const issues = validateFlow(flow({ a: noop({ branch: [{ if: 'result == true', then: 'b' }, { if: 'result.x ==', then: 'b' }] }), b: noop() }));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe('steps.a.branch[1].if');
  });

  it('reports a condition naming an undeclared variable', () => {
    const issues = validateFlow(flow({ a: noop({ branch: [{ if: 'foo == 1', then: 'b' }] }), b: noop() }));
    expect(issues).toEqual([{ path: 'steps.a.branch[0].if', message: expect.stringContaining('foo') }]);
  });

  it('reports a condition naming a step that does not exist', () => {
    const issues = validateFlow(flow({ a: noop({ branch: [{ if: 'steps.ghost.result == 1', then: 'b' }] }), b: noop() }));
    expect(issues).toEqual([{ path: 'steps.a.branch[0].if', message: expect.stringContaining('"ghost"') }]);
  });

  it('reports a template naming an unknown root', () => {
    expectOneIssue(flow({ a: noop({ args: { x: 'hi {{inptu.name}}' } }) }), 'steps.a.args', /unknown template root "inptu"/);
  });

  it('reports a template naming an unknown step', () => {
    expectOneIssue(flow({ a: noop({ args: { x: '{{steps.ghost.result}}' } }) }), 'steps.a.args', /step "ghost", which does not exist/);
  });

  it('reports a template naming an unknown step in output', () => {
    expectOneIssue(flow({ a: noop({ done: true, output: '{{steps.ghost.result}}' }) }), 'steps.a.output', /"ghost"/);
  });

  it('reports a template with bad syntax', () => {
    expectOneIssue(flow({ a: noop({ args: { x: '{{input.}}' } }) }), 'steps.a.args', /template/);
  });

  it('reports result used in args', () => {
    expectOneIssue(flow({ a: noop({ args: { x: '{{result.id}}' } }) }), 'steps.a.args', /"result" is this step's own result/);
  });

  it.each([
    ['step timeout', { a: noop({ timeout: '10 minutes' }) }, {}, 'steps.a.timeout'],
    ['flow timeout', { a: noop() }, { timeout: 'soon' }, 'timeout'],
    ['retry.initial', { a: noop({ retry: { initial: '2x' } }) }, {}, 'steps.a.retry.initial'],
    ['retry.max', { a: noop({ retry: { max: '-5s' } }) }, {}, 'steps.a.retry.max'],
    ['wait', { a: { wait: '5' } }, {}, 'steps.a.wait'],
    ['approval.timeout', { a: { approval: { timeout: '1 day' } } }, {}, 'steps.a.approval.timeout'],
  ])('reports a bad duration in %s', (_what, steps, extra, path) => {
    expectOneIssue(flow(steps, extra), path, /invalid duration/);
  });

  it('reports a duration longer than 100 years', () => {
    expectOneIssue(flow({ w: { wait: '9007199254740991ms', next: 'a' }, a: noop() }), 'steps.w.wait', /longer than 100 years/);
  });

  it('reports a zero step timeout', () => {
    expectOneIssue(flow({ a: noop({ timeout: 0 }) }), 'steps.a.timeout', /greater than zero/);
  });

  it('reports an unreachable step', () => {
    expectOneIssue(flow({ a: noop({ done: true }), orphan: noop() }), 'steps.orphan', /unreachable/);
  });

  it('reports steps reachable only from an unreachable step', () => {
    const issues = validateFlow(flow({ a: noop(), b: noop({ next: 'c' }), c: noop() }));
    expect(issues.map((i) => i.path).sort()).toEqual(['steps.b', 'steps.c']);
  });

  it('reports a fan-out branch that goes to its join with next', () => {
    expectOneIssue(
      flow({ f: { parallel: ['a', 'b'], join: 'j' }, a: noop({ next: 'j' }), b: noop(), j: noop({ done: true }) }),
      'steps.j',
      /goes to its join "j" with a transition/,
    );
  });

  it('reports a seed-form branch that goes with next to the join its sibling names', () => {
    const issues = validateFlow(
      flow({ f: { parallel: ['a', 'b'] }, a: noop({ join: 'j' }), b: noop({ next: 'j' }), j: noop({ done: true }) }),
    );
    expect(issues).toEqual([{ path: 'steps.j', message: expect.stringContaining('goes to its join "j" with a transition') }]);
  });

  it('reports a forEach step that goes to its join with next', () => {
    const issues = validateFlow(flow({ f: { forEach: { items: [1, 2], step: 'a' }, join: 'j' }, a: noop({ next: 'j' }), j: noop() }));
    expect(issues.map((i) => i.path)).toEqual(['steps.j']);
  });

  it('reports branches arriving at different joins (seed form)', () => {
    expectOneIssue(
      flow({ f: { parallel: ['a', 'b'] }, a: noop({ join: 'j1' }), b: noop({ join: 'j2' }), j1: noop(), j2: noop() }),
      'steps.f',
      /arrive at different joins \(j1, j2\)|arrive at different joins \(j2, j1\)/,
    );
  });

  it('reports a branch whose marker names another join than its fan-out', () => {
    expectOneIssue(
      flow({ f: { parallel: ['a', 'b'], join: 'j1' }, a: noop({ join: 'j1' }), b: noop({ join: 'j2' }), j1: noop(), j2: noop() }),
      'steps.b.join',
      /arrives at "j2", but "f" joins at "j1"/,
    );
  });

  it('reports a join marker outside any fan-out', () => {
    const issues = validateFlow(flow({ a: noop({ next: 'b' }), b: noop({ join: 'c' }), c: noop() }));
    expect(issues).toContainEqual({ path: 'steps.b.join', message: expect.stringContaining('not inside a fan-out') });
  });

  it('reports item used outside a forEach', () => {
    expectOneIssue(flow({ a: noop({ args: { x: '{{item.id}}' } }) }), 'steps.a', /uses item\/index but is not inside a forEach/);
  });

  it('reports index used outside a forEach, after the forEach join', () => {
    const issues = validateFlow(
      flow({ f: { forEach: { items: [1], step: 'a' }, join: 'j' }, a: noop({ args: { i: '{{index}}' } }), j: noop({ args: { i: '{{index}}' } }) }),
    );
    expect(issues).toEqual([{ path: 'steps.j', message: expect.stringContaining('not inside a forEach') }]);
  });

  it('reports item in a condition outside a forEach', () => {
    const issues = validateFlow(flow({ a: noop({ branch: [{ if: 'item == 1', then: 'b' }], default: 'b' }), b: noop() }));
    expect(issues).toEqual([{ path: 'steps.a', message: expect.stringContaining('not inside a forEach') }]);
  });

  it.each([
    ['a number', 5],
    ['plain text', 'hits'],
    ['text around a template', 'x{{input.xs}}'],
  ])('reports forEach.items that is %s instead of an array or one template', (_what, items) => {
    expectOneIssue(flow({ f: { forEach: { items, step: 'a' } }, a: noop() }), 'steps.f.forEach.items', /must be an array or a single template/);
  });

  it.each([
    ['a parallel listing itself', { a: { parallel: ['a', 'b'], join: 'b' }, b: noop() }, 'steps.a.parallel'],
    ['a forEach running itself', { a: { forEach: { items: [1], step: 'a' } } }, 'steps.a.forEach.step'],
    ['a fan-out joining at itself', { a: { parallel: ['b'], join: 'a' }, b: noop() }, 'steps.a.join'],
  ])('reports %s', (_what, steps, path) => {
    expect(validateFlow(flow(steps))).toContainEqual({ path, message: expect.stringContaining('itself') });
  });

  it('reports a forEach alias that shadows a template root, at the alias', () => {
    expectOneIssue(
      flow({ f: { forEach: { items: [1], step: 'a', as: 'input' } }, a: noop() }),
      'steps.f.forEach.as',
      /alias "input" shadows a built-in template root/,
    );
  });

  it('reports args on a step without a tool', () => {
    expectOneIssue(flow({ a: { args: { x: 1 }, next: 'b' }, b: noop() }), 'steps.a.args', /only apply to a step with a tool/);
  });

  it('reports a step that is both a tool and an approval', () => {
    expectOneIssue(flow({ a: noop({ approval: true }) }), 'steps.a.approval', /both a tool and an approval/);
  });

  it('reports a zod shape error with its path and no graph issues', () => {
    expect(validateFlow(flow({ a: noop({ retry: { maxAttempts: 'three' } }) }))).toEqual([
      { path: 'steps.a.retry.maxAttempts', message: expect.any(String) },
    ]);
  });

  it('reports many issues at once, each with its own path', () => {
    const issues = validateFlow(
      flow({
        a: noop({ next: 'ghost', args: { x: '{{result}}', y: '{{nope.z}}' }, timeout: 'forever' }),
        b: noop({ next: 'a', done: true }),
        c: noop({ default: 'a' }),
        d: noop({ branch: [{ if: '(((', then: 'a' }] }),
      }),
    );
    const paths = issues.map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining(['steps.a.next', 'steps.a.args', 'steps.a.timeout', 'steps.b', 'steps.c.default', 'steps.d.branch[0].if']),
    );
    expect(issues.filter((i) => i.path === 'steps.a.args')).toHaveLength(2);
    for (const i of issues) {
      expect(typeof i.path).toBe('string');
      expect(i.message.length).toBeGreaterThan(5);
    }
  });
});
