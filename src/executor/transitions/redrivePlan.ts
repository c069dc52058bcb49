/**
 * What a redrive of a failed workflow has to do: a pure function of its compiled flow, its
 * step rows and its error. No I/O; src/executor/transitions/redrive.ts applies the plan in one transaction.
 *
 * Every position of a workflow — the top level, and each branch or item of a fan-out instance
 * (fanout_id, item_index) — is one sequential chain of rows; its last row is where that chain
 * stopped. A position is *unfinished* if the fan-out it belongs to had not settled when the
 * workflow failed (its fork row is still open, or failed as a whole and nothing handled that),
 * and so are the positions enclosing it, up to the top level. In an unfinished position:
 *   - a last row `failed` (the step failed for good) or `cancelled` (live when the workflow
 *     failed) gets a new attempt;
 *   - a last fork row `failed` by a failFast fan-out is reopened, and its own branches are
 *     looked at in turn (only the failed or cancelled ones run again; done ones keep results);
 *   - a last row `done` whose transition failed the workflow (the error names it: a cap it went
 *     over, a branch that did not match) has that transition applied again to its kept result.
 * Fan-outs that had settled keep their join; chains that ended are left alone.
 */
import type { ErrorData } from '../../errors.js';
import type { CompiledFlow } from '../../flow/compiled.js';
import type { RedriveStepRow } from '../../db/queries.js';

export type { RedriveStepRow };

export interface Position {
  fanoutId: string | null;
  itemIndex: number | null;
}

export type RedriveAction =
  /** A new attempt of the row's step, with the row's resolved arguments. */
  | { kind: 'attempt'; row: RedriveStepRow }
  /** The step is created again from the flow (it failed before it ran: its arguments never resolved). */
  | { kind: 'create'; name: string; pos: Position; rowId: string }
  /** A done step's transition runs again with its kept result. */
  | { kind: 'transition'; row: RedriveStepRow };

export type RedrivePlan =
  | { ok: true; reopen: string[]; actions: RedriveAction[] }
  | { ok: false; reason: RedriveRefusalReason; message: string };

export type RedriveRefusalReason = 'failed_by_flow' | 'step_limit' | 'unknown_step' | 'nothing_to_redrive';

const key = (fanoutId: string | null, itemIndex: number | null) => `${fanoutId ?? ''}:${itemIndex ?? ''}`;

export function planRedrive(flow: CompiledFlow, rows: readonly RedriveStepRow[], error: ErrorData | null): RedrivePlan {
  const code = error?.code;
  if (code === 'failed_by_flow') {
    return { ok: false, reason: 'failed_by_flow', message: `the flow itself ended the workflow as failed at step "${error?.step ?? '?'}"; a redrive would end it the same way` };
  }
  if (code === 'step_limit') {
    return { ok: false, reason: 'step_limit', message: `the workflow used up its step budget of ${flow.maxSteps} step rows; a redrive would go over it again` };
  }
  const unknown = rows.find((r) => !flow.steps.has(r.name));
  if (unknown) return { ok: false, reason: 'unknown_step', message: `step row ${unknown.id} ("${unknown.name.slice(0, 200)}") is not in the workflow's flow` };

  const sorted = [...rows].sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
  const last = new Map<string, RedriveStepRow>();
  const byForkPositions = new Map<string, Set<string>>();
  const hasChildren = new Set<string>();
  for (const r of sorted) {
    last.set(key(r.fanout_id, r.item_index), r);
    if (r.fanout_id !== null) {
      hasChildren.add(r.fanout_id);
      let set = byForkPositions.get(r.fanout_id);
      if (!set) byForkPositions.set(r.fanout_id, (set = new Set()));
      set.add(key(r.fanout_id, r.item_index));
    }
  }

  const reopen: string[] = [];
  const actions: RedriveAction[] = [];
  // Positions to look at, starting at the top level; unsettled forks add their branches.
  const queue: string[] = [key(null, null)];
  for (let k = queue.shift(); k !== undefined; k = queue.shift()) {
    const row = last.get(k);
    if (!row) continue;
    const step = flow.steps.get(row.name)!;
    const pos: Position = { fanoutId: row.fanout_id, itemIndex: row.item_index };
    const isFork = hasChildren.has(row.id);
    if (isFork && (row.status === 'failed' || (row.status === 'done' && row.fanout_open))) {
      // A fan-out that had not settled: reopen it if it failed as a whole, look at its branches.
      if (row.status === 'failed') reopen.push(row.id);
      for (const child of byForkPositions.get(row.id) ?? []) queue.push(child);
      continue;
    }
    if (row.status === 'cancelled') {
      actions.push({ kind: 'attempt', row });
    } else if (row.status === 'failed') {
      // A step that failed as it was created (a template; no executor took it, no arguments
      // resolved), or a fork or pass step (their rows only record a decision): created again.
      const atCreation = row.args === null && row.executor_id === null && step.kind !== 'gate' && step.kind !== 'timer';
      if (step.kind === 'fork' || step.kind === 'pass' || atCreation) actions.push({ kind: 'create', name: row.name, pos, rowId: row.id });
      else actions.push({ kind: 'attempt', row });
    } else if (row.status === 'done' && !isFork && (transitionFailed(step.transition.kind, row, error) || outputOverCap(row, error))) {
      // Its transition failed the workflow (a cap, a branch that did not match): it runs again on
      // the kept result. A fork row that never fanned out is created again (it records the items).
      if (step.kind === 'fork') actions.push({ kind: 'create', name: row.name, pos, rowId: row.id });
      else actions.push({ kind: 'transition', row });
    }
  }
  if (actions.length === 0) {
    return {
      ok: false,
      reason: 'nothing_to_redrive',
      message: `the failure (${code ?? 'unknown'}) left no failed or cancelled step to run again`,
    };
  }
  return { ok: true, reopen, actions };
}

/** The error names this done row, whose transition (not a chain's end) failed the workflow. */
function transitionFailed(kind: string, row: RedriveStepRow, error: ErrorData | null): boolean {
  return kind !== 'arrive' && error?.step === row.name;
}

/** The last chain of the workflow ended with an output above caps.outputBytes (the error names no step). */
function outputOverCap(row: RedriveStepRow, error: ErrorData | null): boolean {
  const cap = (error?.details as { cap?: unknown } | undefined)?.cap;
  return row.fanout_id === null && error?.code === 'cap_exceeded' && error.step === undefined && (cap === 'outputBytes' || cap === 'jsonDepth');
}

/** How many step rows the plan creates at least (for the step budget). */
export function plannedRows(plan: Extract<RedrivePlan, { ok: true }>): number {
  return plan.actions.filter((a) => a.kind !== 'transition').length;
}
