/**
 * The mixed load every scenario runs: six kinds of workflow (a chain, a parallel fork, a
 * forEach, a gate the harness approves, a timer, a wait for a signal the harness sends), each
 * with side effects through `http.request`
 * and through the MCP server `count` (scripts/chaos/effects.ts). A workflow's `name` is its
 * kind, so the side effects it must have caused can be listed from its row alone.
 */
import type { EffectServer } from './effects.js';
import { effectId } from './effects.js';

export const KINDS = ['chain', 'fanout', 'foreach', 'gate', 'timer', 'signal'] as const;

/** The signal a `signal` workflow waits for, keyed by its own id (the harness sends it: Scenario.startApprover). */
export const CHAOS_SIGNAL = 'chaos.paid';
export type Kind = (typeof KINDS)[number];

/** The MCP server of the chaos config (its tool is `count.effect`). */
export const MCP_SERVER = 'count';
const FOREACH_ITEMS = 4;

export interface Targets {
  httpUrl: string;
}

export function targetsOf(effects: EffectServer): Targets {
  return { httpUrl: effects.httpUrl };
}

/** A side effect through `http.request`: POST {wf, e, i?, ms}. */
export function httpEffect(t: Targets, e: string, ms: number, item = false): Record<string, unknown> {
  return {
    tool: 'http.request',
    args: { url: t.httpUrl, method: 'POST', body: { wf: '{{workflow.id}}', e, ms, ...(item ? { i: '{{index}}' } : {}) } },
  };
}

/** A side effect through MCP: `count.effect` {wf, e, i?, ms}. */
export function mcpEffect(e: string, ms: number, item = false): Record<string, unknown> {
  return { tool: `${MCP_SERVER}.effect`, args: { wf: '{{workflow.id}}', e, ms, ...(item ? { i: '{{index}}' } : {}) } };
}

export function flowFor(kind: Kind, t: Targets): unknown {
  switch (kind) {
    case 'chain':
      return {
        start: 'a',
        steps: {
          a: { tool: 'core.echo', args: { x: 1 }, next: 'h' },
          h: { ...httpEffect(t, 'h', 120), next: 'm' },
          m: { ...mcpEffect('m', 120), next: 's' },
          s: { tool: 'core.sleep', args: { ms: 100 }, next: 'z' },
          z: { tool: 'core.noop', done: true },
        },
      };
    case 'fanout':
      return {
        start: 'f',
        steps: {
          f: { parallel: ['p1', 'p2'], join: 'j' },
          p1: httpEffect(t, 'p1', 150),
          p2: { ...mcpEffect('p2', 150), next: 'p3' },
          p3: { tool: 'core.noop' },
          j: { tool: 'core.echo', args: { joined: true }, done: true },
        },
      };
    case 'foreach':
      return {
        start: 'f',
        steps: {
          f: { forEach: { items: '{{input.items}}', step: 'each' }, join: 'j' },
          each: httpEffect(t, 'each', 80, true),
          j: { tool: 'core.noop', done: true },
        },
      };
    case 'gate':
      return {
        start: 'g0',
        steps: {
          g0: { tool: 'core.noop', next: 'gate' },
          gate: { approval: {}, next: 'fin' },
          fin: { ...mcpEffect('fin', 50), done: true },
        },
      };
    case 'timer':
      return {
        start: 't',
        steps: {
          t: { wait: '300ms', next: 'm' },
          m: { ...mcpEffect('m', 100), done: true },
        },
      };
    case 'signal':
      return {
        start: 's0',
        steps: {
          s0: { tool: 'core.noop', next: 'paid' },
          paid: { signal: { name: CHAOS_SIGNAL, key: '{{workflow.id}}' }, next: 'fin' },
          fin: { ...httpEffect(t, 'fin', 50), done: true },
        },
      };
  }
}

export function inputFor(kind: Kind): Record<string, unknown> {
  return kind === 'foreach' ? { items: Array.from({ length: FOREACH_ITEMS }, (_, i) => i) } : {};
}

/** The side effects a completed workflow of `kind` must have caused, by identity. */
export function expectedEffects(kind: string, wf: string, input: unknown): string[] {
  switch (kind) {
    case 'chain':
      return [effectId(wf, 'h', undefined), effectId(wf, 'm', undefined)];
    case 'fanout':
      return [effectId(wf, 'p1', undefined), effectId(wf, 'p2', undefined)];
    case 'foreach': {
      const items = (input as { items?: unknown[] }).items ?? [];
      return items.map((_, i) => effectId(wf, 'each', i));
    }
    case 'gate':
      return [effectId(wf, 'fin', undefined)];
    case 'timer':
      return [effectId(wf, 'm', undefined)];
    case 'signal':
      return [effectId(wf, 'fin', undefined)];
    default:
      return [];
  }
}

/** Rows for one multi-row INSERT of `count` workflows, the kinds taken in turn from `offset`. */
export function mixedRows(count: number, t: Targets, offset = 0): { name: string; flow: string; input: string }[] {
  return Array.from({ length: count }, (_, i) => {
    const kind = KINDS[(offset + i) % KINDS.length]!;
    return { name: kind, flow: JSON.stringify(flowFor(kind, t)), input: JSON.stringify(inputFor(kind)) };
  });
}
