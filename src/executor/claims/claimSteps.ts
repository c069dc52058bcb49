/**
 * One claim: up to `free` ready steps for this executor.
 *
 * - Fast path (no limits configured): one statement, oldest ready first. After a full claim the
 *   next is fair across roles (lanes.ts: round-robin over the roles with running workflows, an
 *   equal share each, then each user of a role, then that user's workflows), so one role's burst,
 *   recursion or fan-out never holds another role's step back for more than a claim or two
 *   (or ROLE_RECHECK_MS, while one role alone had steps ready). When one workflow took most of
 *   a full batch, a later claim is fair across workflows (round-robin over the workflows with
 *   ready steps, an equal share each).
 * - With limits: one transaction under an advisory lock that every executor's limited claim
 *   takes, which counts the running tool steps of the whole database and claims only the
 *   candidates the limits have room for (the rest stay ready, untouched). So the limits hold
 *   summed over every executor.
 * - A claim statement that fails because of one row (a trigger, a payload PostgreSQL refuses)
 *   is retried one row at a time under savepoints; a row that still fails has its workflow
 *   failed with `claim_failed`, and the others are claimed.
 *
 * Steps whose timeout differs from the default get their own lease.
 */
import type pg from 'pg';
import { withTransaction } from '../../db/connect.js';
import {
  claimLockedSteps,
  claimReadySteps,
  claimReadyStepsFairly,
  claimReadyStepsFairlyAcrossRoles,
  claimReadyToollessSteps,
  countRunningToolSteps,
  endWorkflowCancellingLiveSteps,
  extendLeasesIfRunning,
  lockClaimCandidates,
  lockClaimCandidatesFairly,
  lockClaimCandidatesFairlyAcrossRoles,
  lockClaimLimits,
  lockWorkflows,
  notifyEvents,
  peekReadySteps,
  type ClaimBy,
  type ClaimCandidate,
  type ClaimedStep,
  type Queryable,
} from '../../db/queries.js';
import { namingStatement, type ErrorData } from '../../errors.js';
import { EVENTS_CHANNEL } from '../../events.js';
import { DEFAULT_STEP_TIMEOUT_MS } from '../../flow/compiled.js';
import type { Logger } from '../../logger.js';
import type { LimitPolicy } from '../../tools/limits.js';
import type { ExecutorMetrics } from '../../telemetry/executorMetrics.js';
import { toolPatternToLike } from '../../tools/permissions.js';
import type { WorkflowCache } from '../core/workflowCache.js';
import { claimGatedOrSkip, gatedDue } from './claimGated.js';
import { isRowSpecificPgError } from './rowErrors.js';
import type { ClaimDeps, FairClaimState } from './claimDeps.js';

/**
 * After a role-fair claim found ready steps of one role only, the next waits this long: a
 * single busy role (the bench, most deployments) pays for at most five a second, and another
 * role's step waits no longer than this for its turn.
 */
export const ROLE_RECHECK_MS = 200;

export { newFairClaimState, type ClaimDeps, type FairClaimState } from './claimDeps.js';

export interface Claim {
  rows: ClaimedStep[];
  /** Whether ready steps may remain that this claim did not take. */
  moreReady: boolean;
  /** Running steps of workflows failed because one of their rows could not be claimed: abort them. */
  cancelledRunning: string[];
  /**
   * A fair claim (the last full batch was mostly one workflow's): its steps go ahead of steps
   * prefetched earlier, so a new workflow's step never waits behind a big fan-out's.
   */
  fair: boolean;
  /** Gated steps wait for a key or a token: claim again in this many ms (claimGated.ts). */
  retryInMs?: number;
}

/** Who claims, for how long, and whether the claim statement announces step.started (events on). */
function claimBy(deps: ClaimDeps, leaseMs: number): ClaimBy {
  return { executorId: deps.executorId, leaseMs, startedSchema: deps.emitEvents ? deps.schema : null };
}

export { isRowSpecificPgError } from './rowErrors.js';

interface Candidate {
  id: string;
  workflow_id: string;
  name: string;
}

interface Poisoned {
  step: Candidate;
  err: Error;
}

/**
 * Claims up to `free` ready steps; with `toollessOnly`, only steps without a tool (readied
 * gates, due timers), which an executor claims even when every tool slot is busy.
 */
export async function claimSteps(deps: ClaimDeps, free: number, opts: { toollessOnly?: boolean; gatedFree?: number } = {}): Promise<Claim> {
  const startedAt = performance.now();
  const leaseMs = DEFAULT_STEP_TIMEOUT_MS + deps.leaseGraceMs;
  const toollessOnly = opts.toollessOnly === true;
  const limited = deps.limits !== undefined && !deps.limits.unlimited && !toollessOnly;
  const fair = (deps.fairness.next || rolesDue(deps.fairness)) && !toollessOnly;
  let rows: ClaimedStep[];
  let moreReady: boolean;
  const cancelledRunning: string[] = [];
  // Steps under keys and rates first (the hot claims pass them over); refusals are handled there.
  const gatedFree = toollessOnly ? 0 : Math.min(free, opts.gatedFree ?? free);
  const gated = gatedFree > 0 && gatedDue(deps.fairness.gatedNotBefore) ? await claimGatedOrSkip(deps, gatedFree, claimBy(deps, leaseMs)) : undefined;
  const left = free - (gated?.rows.length ?? 0);
  try {
    if (toollessOnly) {
      rows = await namingStatement('claimReadyToollessSteps', () => claimReadyToollessSteps(deps.pool, { ...claimBy(deps, leaseMs), limit: free }));
      moreReady = rows.length >= free;
    } else if (left > 0) {
      ({ rows, moreReady } = limited
        ? await namingStatement('claimWithinLimits', () => claimWithinLimits(deps, left, leaseMs, { isolate: false }))
        : await namingStatement('claimReadySteps', () => claimFast(deps, left, leaseMs)));
    } else {
      ({ rows, moreReady } = { rows: [], moreReady: true });
    }
  } catch (err) {
    if (!isRowSpecificPgError(err)) throw err;
    deps.log.warn({ err, free }, 'claiming a batch of steps failed; claiming them one at a time');
    const isolated = await claimWithinLimits(deps, toollessOnly ? free : left, leaseMs, { isolate: true, toollessOnly });
    rows = isolated.rows;
    moreReady = true;
    if (isolated.poisoned.length > 0 && isolated.poisoned.length === isolated.tried && isolated.tried > 1) throw err; // not one row
    for (const p of isolated.poisoned) {
      try {
        cancelledRunning.push(...(await failUnclaimable(deps, p)));
      } catch (failErr) {
        deps.log.error({ err: failErr, workflowId: p.step.workflow_id, stepId: p.step.id }, 'could not fail the workflow of a step that cannot be claimed');
      }
    }
  }
  if (gated) {
    rows = [...gated.rows, ...rows];
    // Gated steps started: more may follow as their keys free.
    if (gated.rows.length > 0) moreReady = true;
  }
  // A full claim: steps wait, maybe another role's; the next claim is fair across roles.
  if (!toollessOnly && rows.length >= free) deps.fairness.rolesNext = true;
  if (rows.length > 0) await extendOwnLeases(deps, rows, leaseMs);
  deps.metrics?.claimed((performance.now() - startedAt) / 1000, rows.length);
  return { rows, moreReady, cancelledRunning, fair, ...(gated?.retryInMs !== undefined ? { retryInMs: gated.retryInMs } : {}) };
}

/**
 * Runs one claim statement in a transaction of its own planned with index scans (see
 * withTransaction's preferIndexScans): with statistics from before a burst of ready steps, the
 * claim otherwise reads every ready row through a bitmap scan and sorts them to take its batch,
 * at every claim. Two round trips more than the statement alone; only the batch claims of tool
 * steps take them (a readied gate's toolless claim stays one round trip).
 */
function claimPlannedWithIndexScans<T>(deps: ClaimDeps, claim: (db: pg.PoolClient) => Promise<T>): Promise<T> {
  return withTransaction(deps.pool, claim, { preferIndexScans: true });
}

/** Whether the next claim is a role-fair one (see ROLE_RECHECK_MS). */
function rolesDue(fair: FairClaimState): boolean {
  return fair.rolesNext && Date.now() >= fair.rolesNotBefore;
}

/** After a role-fair claim: move the cursor on; if it saw one role's steps only, wait before the next. */
function movedOnAcrossRoles(fair: FairClaimState, from: string, nextRole: string | null, roles: number): void {
  fair.rolesNext = false;
  fair.roleCursor = nextRole ?? '';
  // One role's steps only, from the first role on, and no role beyond: nobody else waits now.
  if (roles < 2 && nextRole === null && from === '') fair.rolesNotBefore = Date.now() + ROLE_RECHECK_MS;
}

/**
 * The unlimited path: the hot statement; after a full claim, a role-fair one (lanes.ts); after
 * a batch one workflow dominated, the workflow-fair one. What a fair claim leaves of the batch
 * is filled with the oldest steps.
 */
async function claimFast(deps: ClaimDeps, free: number, leaseMs: number): Promise<{ rows: ClaimedStep[]; moreReady: boolean }> {
  const fair = deps.fairness;
  const base = claimBy(deps, leaseMs);
  if (rolesDue(fair)) {
    const from = fair.roleCursor;
    const r = await claimPlannedWithIndexScans(deps, (db) => claimReadyStepsFairlyAcrossRoles(db, { ...base, limit: free, fromRole: from }));
    movedOnAcrossRoles(fair, from, r.nextRole, r.rolesClaimed);
    return fillWithOldest(deps, base, free, r.rows, r.nextRole !== null);
  }
  if (!fair.next) {
    const rows = await claimPlannedWithIndexScans(deps, (db) => claimReadySteps(db, { ...base, limit: free }));
    const full = rows.length >= free;
    fair.next = full && dominated(rows);
    return { rows, moreReady: full };
  }
  fair.next = false;
  const after = fair.cursor;
  const f = await claimPlannedWithIndexScans(deps, (db) => claimReadyStepsFairly(db, { ...base, limit: free, after, workflows: free }));
  // Round robin: continue after the last workflow visited, or start over when the end was reached.
  fair.cursor = f.visited >= free && f.lastVisited !== null ? f.lastVisited : '0';
  if (f.visited === 0) return { rows: f.rows, moreReady: after !== '0' };
  return fillWithOldest(deps, base, free, f.rows, false);
}

/**
 * Fills what a fair claim left of its batch (lanes or workflows with fewer ready steps than their
 * share) with the oldest ready steps. If that fails on a row, the rows already claimed still
 * run; the next claim isolates the row.
 */
async function fillWithOldest(
  deps: ClaimDeps,
  base: ClaimBy,
  free: number,
  rows: ClaimedStep[],
  more: boolean,
): Promise<{ rows: ClaimedStep[]; moreReady: boolean }> {
  if (rows.length < free) {
    try {
      rows.push(...(await claimPlannedWithIndexScans(deps, (db) => claimReadySteps(db, { ...base, limit: free - rows.length }))));
    } catch (err) {
      if (!isRowSpecificPgError(err)) throw err;
      return { rows, moreReady: true };
    }
  }
  return { rows, moreReady: more || rows.length >= free };
}

/** Whether one workflow holds more than half of a claimed batch (of at least two rows). */
function dominated(rows: { workflow_id: string }[]): boolean {
  if (rows.length < 2) return false;
  const counts = new Map<string, number>();
  for (const r of rows) {
    const n = (counts.get(r.workflow_id) ?? 0) + 1;
    if (n * 2 > rows.length) return true;
    counts.set(r.workflow_id, n);
  }
  return false;
}

/**
 * The limited path (and the row-by-row retry of either path): one transaction; with limits it
 * takes the limits lock, counts running tool steps, locks candidates and claims those that fit.
 * With `isolate`, each candidate is claimed under its own savepoint and those that fail are
 * returned as poisoned (their transaction goes on).
 */
async function claimWithinLimits(
  deps: ClaimDeps,
  free: number,
  leaseMs: number,
  opts: { isolate: boolean; toollessOnly?: boolean },
): Promise<{ rows: ClaimedStep[]; moreReady: boolean; poisoned: Poisoned[]; tried: number }> {
  const { isolate, toollessOnly = false } = opts;
  const limits = deps.limits && !deps.limits.unlimited && !toollessOnly ? deps.limits : undefined;
  return withTransaction(deps.pool, async (client) => {
    let moreReady: boolean;
    let chosen: Candidate[];
    if (limits) {
      await lockClaimLimits(client, deps.schema);
      const tally = limits.tally();
      for (const r of await countRunningToolSteps(client)) tally.add(r.tool, r.created_by, r.n);
      const saturated = tally.saturated();
      const skip = { skipToolsLike: saturated.global ? ['%'] : saturated.toolPatterns.map(toolPatternToLike), skipUsers: saturated.users };
      // A role-fair pick is not filled up to the batch: the rest waits for the next claim.
      const roleFair = !isolate && rolesDue(deps.fairness);
      const candidates = await lockCandidates(client, deps.fairness, free, skip, isolate);
      // Steps held back by a limit wait for a slot of their tool or user to free up.
      moreReady = roleFair || candidates.length >= free || saturated.global || saturated.toolPatterns.length > 0 || saturated.users.length > 0;
      chosen = candidates.filter((c) => c.tool === null || tally.tryAcquire(c.tool, c.created_by) !== null);
      if (chosen.length < candidates.length) moreReady = true;
    } else {
      chosen = await peekReadySteps(client, free, toollessOnly);
      moreReady = chosen.length >= free;
    }
    if (!isolate) {
      const rows = await claimLockedSteps(client, { ...claimBy(deps, leaseMs), ids: chosen.map((c) => c.id) });
      return { rows, moreReady, poisoned: [], tried: chosen.length };
    }
    const rows: ClaimedStep[] = [];
    const poisoned: Poisoned[] = [];
    for (const c of chosen) {
      await client.query('SAVEPOINT stepd_claim_one');
      try {
        rows.push(...(await claimLockedSteps(client, { ...claimBy(deps, leaseMs), ids: [c.id] })));
        await client.query('RELEASE SAVEPOINT stepd_claim_one');
      } catch (err) {
        if (!isRowSpecificPgError(err)) throw err;
        await client.query('ROLLBACK TO SAVEPOINT stepd_claim_one');
        poisoned.push({ step: c, err: err as Error });
      }
    }
    return { rows, moreReady, poisoned, tried: chosen.length };
  }, { preferIndexScans: true });
}

/**
 * The candidates of a limited claim: the oldest ready steps; after a full claim, fairly across
 * roles; after a batch one workflow dominated, a fair share of each workflow visited round-robin
 * (as claimFast does). A role-fair pick that leaves room is not filled: the next claim follows.
 */
async function lockCandidates(
  client: Queryable,
  fair: FairClaimState,
  free: number,
  skip: { skipToolsLike: string[]; skipUsers: string[] },
  isolate: boolean,
): Promise<ClaimCandidate[]> {
  if (!isolate && rolesDue(fair)) {
    const from = fair.roleCursor;
    const r = await lockClaimCandidatesFairlyAcrossRoles(client, { limit: free, fromRole: from, ...skip });
    movedOnAcrossRoles(fair, from, r.nextRole, r.rolesLocked);
    return r.candidates;
  }
  if (!fair.next || isolate) {
    const candidates = await lockClaimCandidates(client, { limit: free, ...skip });
    if (!isolate) fair.next = candidates.length >= free && dominated(candidates);
    return candidates;
  }
  fair.next = false;
  const f = await lockClaimCandidatesFairly(client, { limit: free, after: fair.cursor, workflows: free, ...skip });
  fair.cursor = f.visited >= free && f.lastVisited !== null ? f.lastVisited : '0';
  return f.candidates;
}

/** Fails the workflow of a step that cannot be claimed, cancelling its live steps. Returns those that were running. */
async function failUnclaimable(deps: ClaimDeps, p: Poisoned): Promise<string[]> {
  const name = p.step.name.length > 200 ? `${p.step.name.slice(0, 200)}…` : p.step.name;
  const error: ErrorData = {
    code: 'claim_failed',
    message: `step "${name}" could not be started: the database refused to claim it (${p.err.message})`,
    step: name,
    details: { stepId: p.step.id, sqlstate: (p.err as { code?: string }).code ?? null },
  };
  deps.log.error({ err: p.err, workflowId: p.step.workflow_id, stepId: p.step.id }, 'a step cannot be claimed; failing its workflow');
  const cancelled = await withTransaction(deps.pool, async (client) => {
    const [locked] = await lockWorkflows(client, [p.step.workflow_id]);
    if (!locked || locked.status !== 'running') return [];
    const running = await endWorkflowCancellingLiveSteps(client, p.step.workflow_id, { status: 'failed', error });
    if (deps.emitEvents) await announceFailed(client, deps.schema, p.step.workflow_id, error);
    return running;
  });
  deps.cache.forget(p.step.workflow_id);
  return cancelled;
}

async function announceFailed(db: Queryable, schema: string, workflowId: string, error: ErrorData): Promise<void> {
  const payload = JSON.stringify({ type: 'workflow.failed', schema, workflowId, error: { code: error.code, message: error.message.slice(0, 500) }, at: new Date().toISOString() });
  await notifyEvents(db, EVENTS_CHANNEL, [payload]);
}

async function extendOwnLeases(deps: ClaimDeps, rows: ClaimedStep[], leaseMs: number): Promise<void> {
  const infos = await deps.cache.load(deps.pool, rows.map((r) => r.workflow_id));
  const own: { id: string; leaseMs: number }[] = [];
  for (const row of rows) {
    const step = infos.get(row.workflow_id)?.flow.steps.get(row.name);
    const wanted = step ? step.timeoutMs + deps.leaseGraceMs : leaseMs;
    if (wanted !== leaseMs) own.push({ id: row.id, leaseMs: wanted });
  }
  await extendLeasesIfRunning(deps.pool, deps.executorId, own);
}
