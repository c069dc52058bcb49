/**
 * The capacity claim: ready steps under a concurrency key or a rate (gated, sql/0028), which the
 * hot claims leave alone. One transaction: lock the most urgent, oldest gated candidates (a
 * window several times the free slots, so one full key never hides the steps of others), ask
 * the database which may start (capacity_verdicts: keys counted and tokens taken under the
 * claim-limits lock, exact across executors and workers), and claim those. The others stay
 * ready: no slot, no attempt, nothing written. Configured limits (limits.concurrency, tools,
 * users) apply as in a limited claim.
 *
 * When it runs: at most every GATED_IDLE_MS while no gated step waits (one probe of an empty
 * partial index); while some wait, again when the next token comes or every KEY_RECHECK_MS for
 * a full key (a key frees when a step ends anywhere). Steps whose key is full, and steps that need
 * a token from a bucket this executor found empty (until its next window), are not candidates:
 * a backlog of one key or one rate never hides the steps of others.
 */
import { withTransaction } from '../../db/connect.js';
import { anyGatedStepReady, capacityVerdicts, claimGatedSteps, lockGatedCandidates } from '../../db/queries/capacity.js';
import { countRunningToolSteps, lockClaimLimits, type ClaimBy, type ClaimedStep } from '../../db/queries.js';
import { toolPatternToLike } from '../../tools/permissions.js';
import type { ClaimDeps } from './claimDeps.js';
import { isRowSpecificPgError } from './rowErrors.js';

/** With no gated step waiting, the capacity claim looks again after this long. */
export const GATED_IDLE_MS = 250;
/** After the database refused a capacity claim because of a row, the next waits this long. */
export const GATED_REFUSED_MS = 1_000;
/** While steps wait for a full key, it looks again this often. */
export const KEY_RECHECK_MS = 100;
/** Candidates looked at per free slot (bounded by MAX_WINDOW). */
const WINDOW_PER_SLOT = 8;
const MAX_WINDOW = 500;

export interface GatedClaim {
  rows: ClaimedStep[];
  /** Steps that waited for a full key, and for a token, in this claim. */
  keyBlocked: number;
  throttled: number;
  /** When to look again (ms), if steps still wait. */
  retryInMs?: number;
}

/** Timers fire a little early or late: a claim this close to its time is due (a token is not missed by a poll). */
const DUE_SLACK_MS = 5;

/** Whether the capacity claim is due (FairClaimState.gatedNotBefore). */
export function gatedDue(notBefore: number): boolean {
  return Date.now() + DUE_SLACK_MS >= notBefore;
}

export async function claimGated(deps: ClaimDeps, free: number, by: ClaimBy): Promise<GatedClaim> {
  const limits = deps.limits && !deps.limits.unlimited ? deps.limits : undefined;
  const fair = deps.fairness;
  const skipRateKeys = bucketsStillEmpty(fair.emptyBuckets, Date.now());
  // The usual case, nothing gated: one probe of an empty index, no transaction.
  const claim: GatedClaim & { seen: number } = !(await anyGatedStepReady(deps.pool)) ? { rows: [], keyBlocked: 0, throttled: 0, seen: 0 } : await withTransaction(
    deps.pool,
    async (client): Promise<GatedClaim & { seen: number }> => {
      let skip = { skipToolsLike: [] as string[], skipUsers: [] as string[] };
      const tally = limits?.tally();
      if (tally) {
        await lockClaimLimits(client, deps.schema);
        for (const r of await countRunningToolSteps(client)) tally.add(r.tool, r.created_by, r.n);
        const saturated = tally.saturated();
        skip = { skipToolsLike: saturated.global ? ['%'] : saturated.toolPatterns.map(toolPatternToLike), skipUsers: saturated.users };
      }
      const candidates = await lockGatedCandidates(client, { limit: Math.min(MAX_WINDOW, free * WINDOW_PER_SLOT), ...skip, skipRateKeys });
      // None though some wait: their keys are full (or their buckets empty): look again soon.
      if (candidates.length === 0) return { rows: [], keyBlocked: 0, throttled: 0, seen: 0, retryInMs: KEY_RECHECK_MS };
      const allowed = tally ? candidates.filter((c) => c.tool === null || tally.tryAcquire(c.tool, c.created_by) !== null) : candidates;
      const verdicts = await capacityVerdicts(client, allowed.map((c) => c.id), free);
      const ok = verdicts.filter((v) => v.verdict === 'ok');
      const rows = ok.length > 0 ? await claimGatedSteps(client, { ...by, ids: ok.map((v) => v.step_id), startedAt: ok[0]!.at }) : [];
      const rated = verdicts.filter((v) => v.verdict === 'rate');
      const now = Date.now();
      for (const v of rated) if (v.blocked_by !== null) fair.emptyBuckets.set(v.blocked_by, now + (v.wait_ms ?? KEY_RECHECK_MS));
      const keyBlocked = verdicts.filter((v) => v.verdict === 'key').length;
      const waits = rated.map((v) => v.wait_ms ?? KEY_RECHECK_MS);
      const retryInMs = waits.length > 0 ? Math.min(...waits, keyBlocked > 0 ? KEY_RECHECK_MS : Infinity) : keyBlocked > 0 || allowed.length < candidates.length ? KEY_RECHECK_MS : undefined;
      return { rows, keyBlocked, throttled: rated.length, seen: candidates.length, ...(retryInMs !== undefined ? { retryInMs } : {}) };
    },
    { preferIndexScans: true },
  );
  // Nothing claimable: look again when the first empty bucket refills, else after a while (a
  // full key's steps are not even candidates: KEY_RECHECK_MS). Steps started: again at the next
  // claim (keys free as they end). Only waits: when the next token comes, or KEY_RECHECK_MS.
  const now = Date.now();
  const refill = soonest(fair.emptyBuckets);
  if (claim.seen === 0) {
    const waitMs = Math.min(claim.retryInMs ?? GATED_IDLE_MS, refill !== undefined ? Math.max(0, refill - now) : Infinity);
    fair.gatedNotBefore = now + waitMs;
    if (fair.emptyBuckets.size > 0 || claim.retryInMs !== undefined) claim.retryInMs = Math.max(1, waitMs);
  } else if (claim.rows.length > 0) fair.gatedNotBefore = 0;
  else fair.gatedNotBefore = now + (claim.retryInMs ?? 0);
  deps.metrics?.capacityWaits?.(claim.keyBlocked, claim.throttled);
  const { seen: _seen, ...out } = claim;
  return out;
}

/** The rate keys of buckets still empty at `now` (the others are forgotten). */
function bucketsStillEmpty(empty: Map<string, number>, now: number): string[] {
  for (const [k, until] of empty) if (until <= now) empty.delete(k);
  return [...empty.keys()];
}

function soonest(empty: Map<string, number>): number | undefined {
  let min: number | undefined;
  for (const until of empty.values()) min = min === undefined ? until : Math.min(min, until);
  return min;
}

/**
 * The capacity claim; if the database refuses it because of one row, the other claims still run
 * and gated steps are tried again after GATED_REFUSED_MS (the error is logged with the row's).
 */
export async function claimGatedOrSkip(deps: ClaimDeps, free: number, by: ClaimBy): Promise<GatedClaim | undefined> {
  try {
    return await claimGated(deps, free, by);
  } catch (err) {
    if (!isRowSpecificPgError(err)) throw err;
    deps.log.error({ err }, 'claiming steps under keys or rates failed; the other steps are claimed, these again shortly');
    deps.fairness.gatedNotBefore = Date.now() + GATED_REFUSED_MS;
    return undefined;
  }
}
