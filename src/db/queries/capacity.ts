/**
 * Sharing capacity (sql/0028): priority caps, flow keys, the capacity claim of gated steps (keys
 * and rates, judged by capacity_verdicts in the database) and what /metrics shows of them.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ClientsConfig } from '../../configFile.js';
import { claimedWithEvents, type ClaimBy, type ClaimCandidate, type ClaimedStep } from './claims.js';
import type { Queryable } from './common.js';

/**
 * Writes the config's `clients.ROLE.maxPriority` as the caps the insert trigger applies (the
 * last executor to start wins: executors share one config). Roles not named are capped at 0.
 */
export async function writePriorityCaps(db: Queryable, clients: ClientsConfig | undefined, executorId: string): Promise<void> {
  const caps = Object.entries(clients ?? {}).flatMap(([role, c]) => (c.maxPriority ? [{ role, max: c.maxPriority }] : []));
  await db.query({
    name: 'stepd_write_priority_caps',
    text: `WITH gone AS (DELETE FROM priority_caps WHERE role <> ALL($1::text[]))
           INSERT INTO priority_caps (role, max_priority, written_by, written_at)
           SELECT r, m, $3, now() FROM unnest($1::text[], $2::int[]) AS u(r, m)
           ON CONFLICT (role) DO UPDATE SET max_priority = excluded.max_priority, written_by = excluded.written_by, written_at = now()`,
    values: [caps.map((c) => c.role), caps.map((c) => c.max), executorId],
  });
}

/** A flow's key value and limit on its workflow row, at admission (while it is running). */
export async function setWorkflowConcurrencyKey(db: Queryable, workflowId: string, key: string, limit: number): Promise<void> {
  await db.query({
    name: 'stepd_set_workflow_concurrency_key',
    text: `UPDATE workflows SET concurrency_key = $2, concurrency_limit = $3 WHERE id = $1 AND status = 'running'`,
    values: [workflowId, key, limit],
  });
}

/**
 * Locks up to `limit` ready gated steps, most urgent then oldest first (workflow_steps_ready_gated_idx),
 * skipping saturated tools and users as a limited claim does, steps whose key is full now (one
 * probe of the running-key index each: a full key's backlog never fills the window and hides
 * the steps of other keys), and steps needing a token from a bucket known empty
 * (`skipRateKeys`, from the last verdicts). The caller asks capacity_verdicts which may start;
 * the others stay ready, untouched.
 */
export async function lockGatedCandidates(
  db: Queryable,
  opts: { limit: number; skipToolsLike: string[]; skipUsers: string[]; skipRateKeys: string[] },
): Promise<ClaimCandidate[]> {
  const { rows } = await db.query<ClaimCandidate>({
    name: 'stepd_lock_gated_candidates',
    text: `SELECT s.id, s.workflow_id, s.name, s.tool, w.created_by
             FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
            WHERE s.status = 'ready' AND s.gated AND s.ready_at <= now()
              AND (cardinality($2::text[]) = 0 OR s.tool IS NULL OR NOT (s.tool LIKE ANY($2::text[])))
              AND (cardinality($3::text[]) = 0 OR w.created_by IS NULL OR NOT (w.created_by = ANY($3::text[])))
              AND (cardinality($4::text[]) = 0 OR s.rate_keys IS NULL OR NOT (s.rate_keys && $4::text[]))
              AND (s.concurrency_key IS NULL OR NOT EXISTS (
                     SELECT 1 FROM workflow_steps x WHERE x.status = 'running' AND x.concurrency_key = s.concurrency_key
                     OFFSET s.concurrency_limit - 1 LIMIT 1))
              AND (w.concurrency_key IS NULL OR w.key_held OR NOT EXISTS (
                     SELECT 1 FROM workflows h WHERE h.status = 'running' AND h.key_held AND h.concurrency_key = w.concurrency_key
                     OFFSET w.concurrency_limit - 1 LIMIT 1))
            ORDER BY s.priority DESC, s.ready_at, s.id LIMIT $1
              FOR UPDATE OF s SKIP LOCKED`,
    values: [opts.limit, opts.skipToolsLike, opts.skipUsers, opts.skipRateKeys],
  });
  return rows;
}

/** Whether any gated step is ready now (one probe of workflow_steps_ready_gated_idx). */
export async function anyGatedStepReady(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>({
    name: 'stepd_any_gated_step_ready',
    text: `SELECT EXISTS (SELECT 1 FROM workflow_steps WHERE status = 'ready' AND gated AND ready_at <= now()) AS any`,
  });
  return rows[0]?.any === true;
}

export interface CapacityVerdict {
  step_id: string;
  /** 'ok' (may start: its tokens and flow key are taken), 'key' (its key is full), 'rate' (no token yet). */
  verdict: 'ok' | 'key' | 'rate';
  /** For 'rate': milliseconds until the missing token. */
  wait_ms: number | null;
  /** The instant the tokens were counted at: the claim's started_at. */
  at: Date;
  /** 'key': the full key; 'rate': the rate key ('COUNT|PERIOD_MS|BURST|NAME') of the empty bucket. */
  blocked_by: string | null;
}

/**
 * capacity_verdicts (sql/0028) over locked candidates, in order, admitting at most `maxOk`: the
 * ones after that are not judged (and not returned). Takes the claim-limits lock.
 */
export async function capacityVerdicts(db: Queryable, ids: string[], maxOk: number): Promise<CapacityVerdict[]> {
  if (ids.length === 0 || maxOk <= 0) return [];
  const { rows } = await db.query<CapacityVerdict>({
    name: 'stepd_capacity_verdicts',
    // One candidate at a time would lock rows in another order than the candidates were locked:
    // the whole list is judged in one call; what exceeds maxOk is cut by the caller's ids order.
    text: `SELECT step_id::text, verdict, wait_ms, at, blocked_by FROM capacity_verdicts($1::bigint[], $2::int)`,
    values: [ids, maxOk],
  });
  return rows;
}

/** Claims gated steps capacity_verdicts admitted (locked by this transaction), started at `startedAt`. */
export async function claimGatedSteps(db: Queryable, opts: ClaimBy & { ids: string[]; startedAt: Date }): Promise<ClaimedStep[]> {
  if (opts.ids.length === 0) return [];
  const { rows } = await db.query<ClaimedStep>({
    name: 'stepd_claim_gated_steps',
    text: `WITH claimed AS (
             UPDATE workflow_steps
                SET updated_at = now(), status = 'running', started_at = $5, executor_id = $1,
                    lease_until = now() + $3 * interval '1 millisecond'
              WHERE id = ANY($2::bigint[]) AND status = 'ready'
             RETURNING *),
           ${claimedWithEvents('$4')}
           SELECT claimed.*, w.created_by FROM claimed JOIN workflows w ON w.id = claimed.workflow_id
            WHERE (SELECT n FROM started) >= 0`,
    values: [opts.executorId, opts.ids, opts.leaseMs, opts.startedSchema ?? null, opts.startedAt],
  });
  return rows;
}

export interface CapacityGauges {
  /** Ready gated steps held back by a full key, by key value (the `top` fullest keys; the rest under ''). */
  keyBlocked: { key: string; n: number }[];
  /** Ready gated steps with rates, not held by a key: waiting for a token, by rate pattern. */
  throttled: { bucket: string; n: number }[];
}

/** What /metrics shows of gated steps: at most `cap` ready gated rows are looked at. */
export async function readCapacityGauges(db: Queryable, cap: number, top = 20): Promise<CapacityGauges> {
  const { rows } = await db.query<{ kind: string; label: string; n: number }>({
    name: 'stepd_metrics_capacity_gauges',
    text: `WITH g AS (
             SELECT s.concurrency_key AS skey, s.concurrency_limit AS slimit, s.rate_keys,
                    CASE WHEN w.key_held THEN NULL ELSE w.concurrency_key END AS wkey, w.concurrency_limit AS wlimit
               FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
              WHERE s.status = 'ready' AND s.gated AND s.ready_at <= now()
              ORDER BY s.priority DESC, s.ready_at, s.id LIMIT $1),
           judged AS (
             SELECT g.*,
                    CASE WHEN g.wkey IS NOT NULL AND (SELECT count(*) FROM workflows h
                                                        WHERE h.status = 'running' AND h.key_held AND h.concurrency_key = g.wkey) >= g.wlimit THEN g.wkey
                         WHEN g.skey IS NOT NULL AND (SELECT count(*) FROM workflow_steps x
                                                        WHERE x.status = 'running' AND x.concurrency_key = g.skey) >= g.slimit THEN g.skey
                    END AS blocked_by
               FROM g),
           keys AS (
             SELECT 'key' AS kind, blocked_by AS label, count(*)::int AS n FROM judged WHERE blocked_by IS NOT NULL GROUP BY blocked_by),
           ranked AS (SELECT kind, label, n, row_number() OVER (ORDER BY n DESC, label) AS k FROM keys)
           SELECT kind, CASE WHEN k <= $2 THEN label ELSE '' END AS label, sum(n)::int AS n FROM ranked
            GROUP BY kind, CASE WHEN k <= $2 THEN label ELSE '' END
           UNION ALL
           SELECT 'rate', split_part(substr(r, length(split_part(r, '|', 1)) + length(split_part(r, '|', 2)) + length(split_part(r, '|', 3)) + 4), chr(31), 1), count(*)::int
             FROM judged CROSS JOIN LATERAL unnest(judged.rate_keys) AS r
            WHERE judged.blocked_by IS NULL
            GROUP BY 2`,
    values: [cap, top],
  });
  return {
    keyBlocked: rows.filter((r) => r.kind === 'key').map((r) => ({ key: r.label, n: Number(r.n) })),
    throttled: rows.filter((r) => r.kind === 'rate').map((r) => ({ bucket: r.label, n: Number(r.n) })),
  };
}
