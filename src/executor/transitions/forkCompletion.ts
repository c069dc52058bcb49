/**
 * Settling a fork instance under its completion policy (DESIGN §2d): `first`, `{atLeast: N}`,
 * `{when: COND}`, and `parallel` with `concurrency`. After a batch of arrivals at the fork, one
 * read of its branches' state decides: join now (cancelling the live branches unless
 * `cancelRemaining` is false), fail the fork (`join_unreachable`), or start the next branches
 * (items) within the concurrency and wait. A fork whose join was created is no longer open, so
 * later arrivals (branches left running) are only recorded: the join is created once, however
 * many executors and transactions its arrivals come in — they are serialized by the workflow row lock.
 */
import type { ErrorData } from '../../errors.js';
import { getStep, type CompiledStep } from '../../flow/compiled.js';
import { joinVerdict, safeVerdict } from '../../flow/joinPolicy.js';
import { resolveTemplates } from '../../flow/templates.js';
import { getForkState, getLatestTopLevelRow, type ForkRow } from '../../db/queries.js';
import type { ForkHost } from './forkHost.js';
import { forkItemCount, forkItemsFrom } from './scope.js';

/** What policy settling needs of ForkSettlement. */
export interface PolicySettler {
  readonly host: ForkHost;
  settle(fork: ForkRow, options?: { cancelLive?: boolean }): Promise<void>;
  failFork(fork: ForkRow, error: ErrorData): Promise<void>;
  /** The fork's `{{results}}` so far; `fresh`: not kept for a later settle in this transaction. */
  resultsNow(fork: ForkRow): Promise<unknown>;
}

/** Whether a fork needs the policy path (the default — every branch, all at once — does not). */
export function settlesByPolicy(step: CompiledStep): boolean {
  const t = step.transition;
  if (t.kind !== 'parallel' && t.kind !== 'forEach') return false;
  if (t.policy !== undefined && t.policy.complete.kind !== 'all') return true;
  return t.kind === 'parallel' && t.concurrency !== undefined;
}

/** After arrivals at `fork` (or when it started with no branch): join, fail, or start more and wait. */
export async function settleByPolicy(s: PolicySettler, fork: ForkRow): Promise<void> {
  const { host } = s;
  const forkStep = getStep(host.wf.flow, fork.name);
  const t = forkStep.transition;
  if (t.kind !== 'parallel' && t.kind !== 'forEach') throw new Error(`step "${fork.name}" is not a fan-out`);
  await host.flush();
  const state = await getForkState(host.db, fork.id);
  if (!state.open) return lateArrival(s);
  let total: number;
  if (t.kind === 'forEach') total = await forkItemCount(host.db, fork, forkStep, host.scopes);
  else if (forkStep.kind === 'fork') total = state.held ?? 0;
  else total = t.conditions ? state.started : t.branches.length;
  const policy = t.policy ?? { complete: { kind: 'all' as const }, cancelRemaining: false };
  let vars: Record<string, unknown> = {};
  if (policy.complete.kind === 'when') {
    const results = await s.resultsNow(fork);
    const scope = await host.scopes.forStep(forkStep, { fanoutId: fork.fanout_id, itemIndex: fork.item_index }, {});
    vars = { ...scope, results, completed: state.completed };
  }
  const verdict = safeVerdict(() => joinVerdict(policy, { total, completed: state.completed, finished: state.finished }, () => vars, fork.name), fork.name);
  if (verdict.kind === 'join') return s.settle(fork, { cancelLive: policy.cancelRemaining });
  if (verdict.kind === 'unreachable') return s.failFork(fork, verdict.error);
  // Wait: start branches (items) into the free places.
  const live = state.started - state.finished;
  if (t.kind === 'forEach') {
    const free = Math.max(0, t.concurrency - live);
    const end = Math.min(total, state.next + free);
    if (end <= state.next) return;
    const items = await forkItemsFrom(host.db, fork, forkStep, state.next, end, host.scopes);
    for (let i = state.next; i < end; i++) await host.createStep(t.step, { fanoutId: fork.id, itemIndex: i }, { item: items[i - state.next], index: i });
    return;
  }
  if (t.concurrency === undefined) return;
  const held = forkStep.kind === 'fork' ? await heldBranches(s, fork) : t.branches;
  const free = Math.max(0, t.concurrency - live);
  for (const name of held.slice(state.started, state.started + free)) {
    await host.createStep(name, { fanoutId: fork.id, itemIndex: t.branches.indexOf(name) }, {});
  }
}

/** The branches a fork without a tool started with: the names its row's result lists. */
async function heldBranches(s: PolicySettler, fork: ForkRow): Promise<string[]> {
  const row = await s.host.scopes.forkResult(fork.id);
  const list = (row as { branches?: unknown } | null)?.branches;
  return Array.isArray(list) ? list.filter((b): b is string => typeof b === 'string') : [];
}

/**
 * A branch left running after its fork joined (cancelRemaining false) ended. Its arrival changes
 * nothing — but if the workflow's top-level chain had already ended and waited for it, the
 * workflow completes now, with that chain's output, once nothing else is live. The chain ended
 * at a step with no transition, or at a fork without a join (its results are the output).
 */
async function lateArrival(s: PolicySettler): Promise<void> {
  const { host } = s;
  const last = await getLatestTopLevelRow(host.db, host.wf.id);
  if (!last || last.status !== 'done') return;
  const step = host.wf.flow.steps.get(last.name);
  if (!step) return;
  const t = step.transition;
  if ((t.kind === 'parallel' || t.kind === 'forEach') && t.join === undefined) {
    const fork = await host.scopes.fork(last.id);
    const state = fork && (await getForkState(host.db, fork.id));
    if (!fork || !state || state.open) return;
    return host.endTopChain(await s.resultsNow(fork));
  }
  if (t.kind !== 'arrive') return;
  const scope = await host.scopes.forStep(step, { fanoutId: null, itemIndex: null }, { result: last.result });
  const output = step.output === undefined ? (last.result ?? null) : resolveTemplates(step.output, scope);
  return host.endTopChain(output);
}
