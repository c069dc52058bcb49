/**
 * One claim: up to `free` ready steps for this executor, in one statement — or, with limits
 * configured, in one transaction that locks candidates and claims only those the limits have
 * room for (the rest stay ready, untouched). Steps whose timeout differs from the default get
 * their own lease.
 */
import type pg from 'pg';
import { withTransaction } from '../db/connect.js';
import { claimLockedSteps, claimReadySteps, extendLeasesIfRunning, lockClaimCandidates, type ClaimedStep } from '../db/queries.js';
import { DEFAULT_STEP_TIMEOUT_MS } from '../flow/compiled.js';
import type { LimitPolicy } from '../tools/limits.js';
import { toolPatternToLike } from '../tools/permissions.js';
import type { WorkflowCache } from './workflowCache.js';

export interface ClaimDeps {
  pool: pg.Pool;
  cache: WorkflowCache;
  executorId: string;
  leaseGraceMs: number;
  limits?: LimitPolicy;
}

export interface Claim {
  rows: ClaimedStep[];
  /** Per claimed step: gives its room under the limits back when it ends. */
  releases: Map<string, () => void>;
  /** Whether ready steps may remain that this claim did not take. */
  moreReady: boolean;
}

export async function claimSteps(deps: ClaimDeps, free: number): Promise<Claim> {
  const leaseMs = DEFAULT_STEP_TIMEOUT_MS + deps.leaseGraceMs;
  const limits = deps.limits;
  const releases = new Map<string, () => void>();
  let rows: ClaimedStep[];
  let moreReady = false;
  if (!limits || limits.unlimited) {
    rows = await claimReadySteps(deps.pool, { executorId: deps.executorId, limit: free, leaseMs });
    moreReady = rows.length >= free;
  } else {
    const saturated = limits.saturated();
    rows = await withTransaction(deps.pool, async (client) => {
      const candidates = await lockClaimCandidates(client, {
        limit: free,
        skipToolsLike: saturated.toolPatterns.map(toolPatternToLike),
        skipUsers: saturated.users,
      });
      // Steps held back by a limit wait for a slot of their tool or user to free up.
      moreReady = candidates.length >= free || saturated.toolPatterns.length > 0 || saturated.users.length > 0;
      for (const c of candidates) {
        const release = limits.tryAcquire(c.tool, c.created_by);
        if (release) releases.set(c.id, release);
        else moreReady = true;
      }
      try {
        return await claimLockedSteps(client, { executorId: deps.executorId, ids: [...releases.keys()], leaseMs });
      } catch (err) {
        for (const release of releases.values()) release();
        throw err;
      }
    });
  }
  if (rows.length > 0) {
    const infos = await deps.cache.load(deps.pool, rows.map((r) => r.workflow_id));
    const own: { id: string; leaseMs: number }[] = [];
    for (const row of rows) {
      const step = infos.get(row.workflow_id)?.flow.steps.get(row.name);
      const wanted = step ? step.timeoutMs + deps.leaseGraceMs : leaseMs;
      if (wanted !== leaseMs) own.push({ id: row.id, leaseMs: wanted });
    }
    await extendLeasesIfRunning(deps.pool, deps.executorId, own);
  }
  return { rows, releases, moreReady };
}
