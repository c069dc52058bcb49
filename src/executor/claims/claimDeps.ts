/**
 * What a claim is given (ClaimDeps) and the claim state an executor keeps between claims
 * (FairClaimState): shared by the claims (claimSteps.ts) and the capacity claim (claimGated.ts),
 * so that neither imports the other for them.
 */
import type pg from 'pg';
import type { Logger } from '../../logger.js';
import type { ExecutorMetrics } from '../../telemetry/executorMetrics.js';
import type { LimitPolicy } from '../../tools/limits.js';
import type { WorkflowCache } from '../core/workflowCache.js';

/** The executor's claim state between claims (one per executor, never shared). */
export interface FairClaimState {
  /** The next claim is a fair one: the last full batch was mostly one workflow's. */
  next: boolean;
  /** Round-robin cursor: the fair claim starts after this workflow id. */
  cursor: string;
  /** The next claim is fair across roles (lanes.ts): the last one came back full, so steps wait. */
  rolesNext: boolean;
  /** Round-robin cursor: the role-fair claim starts at this role ('' the first). */
  roleCursor: string;
  /** No role-fair claim before this (Date.now()): the last one saw one role only. */
  rolesNotBefore: number;
  /** No capacity claim (claimGated.ts) before this (Date.now()). */
  gatedNotBefore: number;
  /** Rate buckets found empty, until their next window (Date.now()): the capacity claim skips their steps. */
  emptyBuckets: Map<string, number>;
}

export function newFairClaimState(): FairClaimState {
  return { next: false, cursor: '0', rolesNext: false, roleCursor: '', rolesNotBefore: 0, gatedNotBefore: 0, emptyBuckets: new Map() };
}

export interface ClaimDeps {
  pool: pg.Pool;
  cache: WorkflowCache;
  executorId: string;
  schema: string;
  leaseGraceMs: number;
  emitEvents: boolean;
  log: Logger;
  fairness: FairClaimState;
  limits?: LimitPolicy;
  /** Told how long each claim took and what it claimed. */
  metrics?: ExecutorMetrics;
}
