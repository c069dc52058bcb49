/**
 * Keyed concurrency in flow JSON (docs/limits-and-fairness.md): `"concurrency": { "key": TEMPLATE,
 * "limit": N }` on a tool step (at most N of its steps running per key value) or on the flow (at
 * most N workflows holding the key value at once). On a fork step `concurrency` is a number (the
 * branches or items live at once); validation names the mix-up. Pure: checks and key rendering.
 */
import type { CompiledFlow } from './compiled.js';
import type { FlowIssue } from './spec.js';
import { resolveTemplates, type TemplateScope } from './templates.js';
import type { KeyedConcurrency } from './keyedConcurrency.js';

/** The longest key value kept (longer ones are cut: a key names an account, a repository…). */
export const MAX_KEY_CHARS = 200;
export const MAX_KEY_LIMIT = 1_000_000;

const SHAPE = '{ "key": "TEMPLATE", "limit": N }';

/** Reads a `{ key, limit }`; returns it or the message that says what is wrong. */
function readKeyed(v: unknown): KeyedConcurrency | string {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return `concurrency must be ${SHAPE}`;
  const o = v as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== 'key' && k !== 'limit');
  if (extra.length > 0) return `concurrency has unknown field(s) ${extra.map((k) => `"${k}"`).join(', ')}; it must be ${SHAPE}`;
  if (typeof o.key !== 'string' || o.key.trim() === '') return `concurrency.key must be a non-empty string template such as "{{input.account}}"`;
  if (typeof o.limit !== 'number' || !Number.isInteger(o.limit) || o.limit < 1 || o.limit > MAX_KEY_LIMIT) {
    return `concurrency.limit must be a whole number from 1 to ${MAX_KEY_LIMIT}`;
  }
  return { key: o.key, limit: o.limit };
}

/** The flow's and each step's keyed concurrency; issues for every misplaced or malformed one. */
export function compileCapacity(flow: CompiledFlow): FlowIssue[] {
  const issues: FlowIssue[] = [];
  const raw = (flow.spec as { concurrency?: unknown }).concurrency;
  if (raw !== undefined) {
    if (typeof raw === 'number') {
      issues.push({ path: 'concurrency', message: `a flow's concurrency is ${SHAPE} (a number only applies to a fork step: the branches live at once)` });
    } else {
      const k = readKeyed(raw);
      if (typeof k === 'string') issues.push({ path: 'concurrency', message: k });
      else flow.concurrency = k;
    }
  }
  for (const [name, step] of flow.steps) {
    const v = (step.spec as { concurrency?: unknown }).concurrency;
    if (v === undefined) continue;
    const at = `steps.${name}.concurrency`;
    // On a fork step it is a number, checked with the fork's other options (forkPolicy.ts).
    if (step.kind === 'fork') continue;
    if (step.kind !== 'tool') {
      issues.push({ path: at, message: 'concurrency applies to tool steps, fork steps (a number) and the whole flow' });
      continue;
    }
    if (typeof v === 'number') {
      issues.push({ path: at, message: `on a tool step concurrency is ${SHAPE}; a number only applies to a fork step (parallel or forEach)` });
      continue;
    }
    const k = readKeyed(v);
    if (typeof k === 'string') issues.push({ path: at, message: k });
    else step.concurrency = k;
  }
  return issues;
}

/** A key template's value as stored: strings as they are, anything else as JSON; cut to MAX_KEY_CHARS. */
export function renderKey(template: string, scope: TemplateScope): string {
  const v = resolveTemplates(template, scope);
  const text = typeof v === 'string' ? v : (JSON.stringify(v) ?? 'null');
  return text.length > MAX_KEY_CHARS ? text.slice(0, MAX_KEY_CHARS) : text;
}

/**
 * A key value as counted: the workflow's role (created_role, percent-encoded so it never holds
 * a `/`) before the value, so one role's keys are never another's (DESIGN.md §7: a tenant holding
 * a key value another service uses must not stall it). The executor's own rows have no role: `/key`.
 */
export function roleScopedKey(role: string | null | undefined, key: string): string {
  return `${encodeURIComponent(role ?? '')}/${key}`;
}
