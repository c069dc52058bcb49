/**
 * Random valid flows for the fuzz scenario, built with fast-check: a sequence of segments — tool
 * steps (echo with random JSON, noop, sleep, side effects over HTTP and MCP), parallel forks of
 * short chains, forEach over random items, timers and branches — each linked to the next, ending
 * at `end`. No flow loops and every one must complete. Each flow comes with the side effects it
 * must cause.
 */
import fc from 'fast-check';
import { effectId } from './effects.js';
import { httpEffect, mcpEffect, type Targets } from './load.js';

type ToolSpec =
  | { kind: 'echo'; args: unknown }
  | { kind: 'noop' }
  | { kind: 'sleep'; ms: number }
  | { kind: 'http'; ms: number }
  | { kind: 'mcp'; ms: number };

type Segment =
  | { kind: 'tool'; tool: ToolSpec }
  | { kind: 'parallel'; branches: ToolSpec[][] }
  | { kind: 'forEach'; items: unknown[]; tool: ToolSpec }
  | { kind: 'timer'; ms: number }
  | { kind: 'branch'; value: number; then: ToolSpec; otherwise: ToolSpec };

/** JSON without "{{" (it would be a template) or NUL (jsonb refuses it). */
const safeJson = fc.jsonValue({ maxDepth: 3 }).filter((v) => {
  const text = JSON.stringify(v);
  return text !== undefined && !text.includes('{{') && !text.includes('\\u0000');
});

const toolSpec: fc.Arbitrary<ToolSpec> = fc.oneof(
  fc.record({ kind: fc.constant('echo' as const), args: fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !k.includes('{{') && !k.includes('\u0000')), safeJson, { maxKeys: 4 }) }),
  fc.record({ kind: fc.constant('noop' as const) }),
  fc.record({ kind: fc.constant('sleep' as const), ms: fc.integer({ min: 0, max: 60 }) }),
  fc.record({ kind: fc.constant('http' as const), ms: fc.integer({ min: 0, max: 80 }) }),
  fc.record({ kind: fc.constant('mcp' as const), ms: fc.integer({ min: 0, max: 80 }) }),
);

const segment: fc.Arbitrary<Segment> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('tool' as const), tool: toolSpec }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('parallel' as const), branches: fc.array(fc.array(toolSpec, { minLength: 1, maxLength: 2 }), { minLength: 2, maxLength: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('forEach' as const), items: fc.array(safeJson, { maxLength: 5 }), tool: toolSpec }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('timer' as const), ms: fc.integer({ min: 1, max: 200 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('branch' as const), value: fc.integer({ min: -5, max: 5 }), then: toolSpec, otherwise: toolSpec }) },
);

export const segments = fc.array(segment, { minLength: 1, maxLength: 5 });

export interface FuzzFlow {
  flow: unknown;
  input: Record<string, unknown>;
  /** Effect identities with `{wf}` standing for the workflow id. */
  effects: { e: string; i?: number }[];
}

function stepOf(name: string, tool: ToolSpec, t: Targets, item: boolean): Record<string, unknown> {
  switch (tool.kind) {
    case 'echo':
      return { tool: 'core.echo', args: tool.args };
    case 'noop':
      return { tool: 'core.noop' };
    case 'sleep':
      return { tool: 'core.sleep', args: { ms: tool.ms } };
    case 'http':
      return httpEffect(t, name, tool.ms, item);
    case 'mcp':
      return mcpEffect(name, tool.ms, item);
  }
}

const isEffect = (tool: ToolSpec) => tool.kind === 'http' || tool.kind === 'mcp';

/** Turns segments into flow JSON; segment k's steps are named `k_…`, the last step `end`. */
export function buildFlow(segs: Segment[], t: Targets): FuzzFlow {
  const steps: Record<string, Record<string, unknown>> = {};
  const effects: FuzzFlow['effects'] = [];
  const input: Record<string, unknown> = {};
  const head = (k: number) => (k < segs.length ? `s${k}` : 'end');
  segs.forEach((seg, k) => {
    const me = `s${k}`;
    const next = head(k + 1);
    switch (seg.kind) {
      case 'tool':
        steps[me] = { ...stepOf(me, seg.tool, t, false), next };
        if (isEffect(seg.tool)) effects.push({ e: me });
        break;
      case 'timer':
        steps[me] = { wait: `${seg.ms}ms`, next };
        break;
      case 'branch': {
        // Compared as strings: a JSON number may reach CEL as a double.
        steps[me] = { tool: 'core.echo', args: { v: `k${seg.value}` }, branch: [{ if: `result.v == "k${seg.value}"`, then: `${me}_then` }], default: `${me}_else` };
        steps[`${me}_then`] = { ...stepOf(`${me}_then`, seg.then, t, false), next };
        steps[`${me}_else`] = { ...stepOf(`${me}_else`, seg.otherwise, t, false), next };
        if (isEffect(seg.then)) effects.push({ e: `${me}_then` });
        break;
      }
      case 'forEach': {
        input[me] = seg.items;
        steps[me] = { forEach: { items: `{{input.${me}}}`, step: `${me}_each` }, join: next };
        steps[`${me}_each`] = stepOf(`${me}_each`, seg.tool, t, true);
        if (isEffect(seg.tool)) seg.items.forEach((_, i) => effects.push({ e: `${me}_each`, i }));
        break;
      }
      case 'parallel': {
        const firsts: string[] = [];
        seg.branches.forEach((chain, b) => {
          chain.forEach((tool, j) => {
            const name = `${me}_b${b}_${j}`;
            if (j === 0) firsts.push(name);
            steps[name] = { ...stepOf(name, tool, t, false), ...(j + 1 < chain.length ? { next: `${me}_b${b}_${j + 1}` } : {}) };
            if (isEffect(tool)) effects.push({ e: name });
          });
        });
        steps[me] = { parallel: firsts, join: next };
        break;
      }
    }
  });
  steps.end = { tool: 'core.noop', done: true };
  return { flow: { start: 's0', steps }, input, effects };
}

export function effectsOf(f: FuzzFlow, wf: string): string[] {
  return f.effects.map((x) => effectId(wf, x.e, x.i));
}

/** Flows that are not flows: random JSON, and valid ones with a broken reference or type. */
export const garbageFlow: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).filter((v) => !JSON.stringify(v).includes('\\u0000')),
  fc.record({ start: fc.string(), steps: fc.dictionary(fc.string({ maxLength: 6 }), safeJson, { maxKeys: 3 }) }),
  fc.constantFrom(
    { start: 'a', steps: { a: { tool: 'core.noop', next: 'missing' } } },
    { start: 'a', steps: { a: { tool: 'core.noop', next: 'b', done: true }, b: { tool: 'core.noop' } } },
    { start: 'a', steps: { a: { parallel: ['b'], join: 'nowhere' }, b: { tool: 'core.noop' } } },
    { start: 'a', steps: { a: { tool: 42 } } },
    { start: 'a', steps: { a: { tool: 'core.echo', args: { x: '{{steps.nope.result}}' }, branch: [{ if: 'result ==', then: 'a' }] } } },
    { start: 'a', steps: { a: { forEach: { items: 'not a list', step: 'b' }, join: 'c' }, b: { tool: 'core.noop' }, c: { tool: 'core.noop' } } },
  ),
);

/** Rows that once stopped claims or admission for everyone (issue 14). */
export function poisonFlows(): { label: string; flow: string }[] {
  let deep: unknown = 'bottom';
  for (let i = 0; i < 3_000; i++) deep = [deep];
  const long = 'x'.repeat(8_000);
  return [
    { label: 'name of 8,000 bytes', flow: JSON.stringify({ start: long, steps: { [long]: { tool: 'core.noop', done: true } } }) },
    { label: 'args nested 3,000 deep', flow: JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: { deep }, done: true } } }) },
    { label: 'flow as a JSON string', flow: JSON.stringify(`😀${JSON.stringify({ start: 'a', steps: { a: { tool: 'core.noop', done: true } } })}`) },
    { label: 'forEach of 5,000 items', flow: JSON.stringify({ start: 'f', steps: { f: { forEach: { items: Array.from({ length: 5_000 }, (_, i) => i), step: 'e' }, join: 'j' }, e: { tool: 'core.noop' }, j: { tool: 'core.noop', done: true } } }) },
  ];
}
