/**
 * Claiming, leasing and handing back steps: the hot path, each guarded by state and owner (recording
 * their outcomes: outcomes.ts). Part of the runtime statement catalogue (src/db/queries.ts).
 */
import type { StepRow } from '../tables.js';
import type { Queryable } from './common.js';
import { NOT_SIGNALLED, NOT_SIGNALLED_S } from './signalWaits.js';
import { STEP_EXECUTOR_ALIVE } from './executors.js';

/**
 * Every claim sets owner and lease alike ($1 executor id, $3 lease in ms) and returns the same
 * rows. A worker step claimed to record its report (sql/0027) keeps the time a worker took it.
 */
export const CLAIM_UPDATE = `UPDATE workflow_steps
                SET updated_at = now(), status = 'running', executor_id = $1,
                    started_at = CASE WHEN task_ended IS NULL THEN now() ELSE coalesce(started_at, now()) END,
                    lease_until = now() + $3 * interval '1 millisecond'`;

/**
 * The end of every claim statement: the claimed rows with their workflow's user, and a
 * step.started event for each, NOTIFYed by the statement itself in id order when `$schema` is
 * not null (events on; the executor's sessions silence the per-row trigger, sql/0016). The
 * payload's step name is cut to 200 characters, so no row can make it exceed NOTIFY's limit.
 * A worker step claimed to record what its worker reported (sql/0027) started when it was
 * handed to the workers: it is not announced again.
 */
function claimReturning(schemaParam: string): string {
  return `RETURNING *),
           ${claimedWithEvents(schemaParam)}
           SELECT claimed.*, w.created_by FROM claimed JOIN workflows w ON w.id = claimed.workflow_id
            WHERE (SELECT n FROM started) >= 0`;
}

/**
 * The `started` CTE of a claim statement: a step.started event for each row of its `claimed`
 * CTE, in id order, when `$schema` is not null. The statement's SELECT must read `started`
 * (`WHERE (SELECT n FROM started) >= 0`) for the events to be sent.
 */
export function claimedWithEvents(schemaParam: string): string {
  return `started AS (
             SELECT count(*) AS n FROM (
               SELECT pg_notify('stepd_events', jsonb_strip_nulls(jsonb_build_object(
                        'type', 'step.started', 'schema', ${schemaParam}::text, 'workflowId', c.workflow_id::text,
                        'stepId', c.id::text, 'step', left(c.name, 200), 'attempt', c.attempt,
                        'itemIndex', c.item_index, 'at', c.started_at))::text)
                 FROM claimed c WHERE ${schemaParam}::text IS NOT NULL AND c.task_ended IS NULL ORDER BY c.id) x)`;
}

/** Who claims, for how long, and the schema step.started events name (null: events off). */
export interface ClaimBy {
  executorId: string;
  leaseMs: number;
  startedSchema?: string | null;
}

export type ClaimedStep = StepRow & { created_by: string | null };

/**
 * The hot path: claims up to `limit` ready steps in one statement, setting owner and lease: those
 * with a priority first (workflow_steps_ready_priority_idx, empty unless priorities are used: one
 * probe), then the oldest. Gated steps (keys, rates) are left to the capacity claim (capacity.ts).
 */
export async function claimReadySteps(
  db: Queryable,
  opts: ClaimBy & { limit: number },
): Promise<ClaimedStep[]> {
  const { rows } = await db.query<ClaimedStep>({
    name: 'stepd_claim_ready_steps',
    text: `WITH urgent AS (
             SELECT id FROM workflow_steps
              WHERE status = 'ready' AND priority > 0 AND NOT gated AND ready_at <= now() AND ${NOT_SIGNALLED}
              ORDER BY priority DESC, ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
           oldest AS (
             SELECT id FROM workflow_steps
              WHERE status = 'ready' AND ready_at <= now() AND priority = 0 AND NOT gated AND ${NOT_SIGNALLED}
              ORDER BY ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
           claimed AS (
             ${CLAIM_UPDATE}
              WHERE id IN (SELECT id FROM (SELECT id FROM urgent UNION ALL SELECT id FROM oldest) u LIMIT $2)
          ${claimReturning('$4')}`,
    values: [opts.executorId, opts.limit, opts.leaseMs, opts.startedSchema ?? null],
  });
  return rows;
}

/**
 * The fair claim: visits up to `workflows` workflows with ready steps, in workflow id order after
 * `after` (a round-robin cursor kept by the caller), and claims up to `limit` steps, at most an
 * equal share from each, oldest first. Walks workflow_steps_ready_workflow_idx one workflow at a
 * time, so one workflow's thousands of ready rows cost one probe. Returns the last workflow
 * visited and how many were visited, so the caller can move its cursor on.
 */
export async function claimReadyStepsFairly(
  db: Queryable,
  opts: ClaimBy & { limit: number; after: string; workflows: number },
): Promise<{ rows: ClaimedStep[]; lastVisited: string | null; visited: number }> {
  const { rows } = await db.query<ClaimedStep & { last_visited: string | null; visited: number }>({
    name: 'stepd_claim_ready_steps_fairly',
    text: `WITH RECURSIVE wf(id, n) AS (
             (SELECT workflow_id, 1 FROM workflow_steps
               WHERE status = 'ready' AND ready_at <= now() AND workflow_id > $4 ORDER BY workflow_id LIMIT 1)
             UNION ALL
             SELECT (SELECT s.workflow_id FROM workflow_steps s
                      WHERE s.status = 'ready' AND s.ready_at <= now() AND s.workflow_id > wf.id ORDER BY s.workflow_id LIMIT 1), wf.n + 1
               FROM wf WHERE wf.id IS NOT NULL AND wf.n < $5),
           visited AS (SELECT id FROM wf WHERE id IS NOT NULL),
           picked AS (
             SELECT p.id FROM visited v CROSS JOIN LATERAL (
                      SELECT s.id, s.ready_at FROM workflow_steps s
                       WHERE s.status = 'ready' AND s.ready_at <= now() AND s.workflow_id = v.id AND NOT s.gated AND ${NOT_SIGNALLED_S}
                       ORDER BY s.ready_at, s.id
                       LIMIT greatest(1, ceil($2::numeric / (SELECT count(*) FROM visited)))::int
                         FOR UPDATE SKIP LOCKED) p
              ORDER BY p.ready_at, p.id LIMIT $2),
           claimed AS (
             ${CLAIM_UPDATE}
              WHERE id IN (SELECT id FROM picked)
             RETURNING *),
           ${claimedWithEvents('$6')}
           SELECT c.*, w.created_by, v.last_visited, v.visited
             FROM (SELECT max(id)::text AS last_visited, count(*)::int AS visited FROM visited) v
             LEFT JOIN (claimed c JOIN workflows w ON w.id = c.workflow_id) ON true
            WHERE (SELECT n FROM started) >= 0`,
    values: [opts.executorId, opts.limit, opts.leaseMs, opts.after, opts.workflows, opts.startedSchema ?? null],
  });
  const first = rows[0];
  const claimed = rows.filter((r) => r.id !== null).map(({ last_visited: _l, visited: _v, ...row }) => row as ClaimedStep);
  return { rows: claimed, lastVisited: first?.last_visited ?? null, visited: first?.visited ?? 0 };
}

/** Claims ready steps without a tool (readied gates, due timers) and worker steps a worker reported (sql/0027): they take no tool slot. */
export async function claimReadyToollessSteps(
  db: Queryable,
  opts: ClaimBy & { limit: number },
): Promise<ClaimedStep[]> {
  const { rows } = await db.query<ClaimedStep>({
    name: 'stepd_claim_ready_toolless_steps',
    text: `WITH claimed AS (
             ${CLAIM_UPDATE}
              WHERE id IN (SELECT id FROM workflow_steps
                            WHERE status = 'ready' AND (tool IS NULL OR task_ended IS NOT NULL) AND ready_at <= now() AND NOT gated AND ${NOT_SIGNALLED}
                            ORDER BY ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
          ${claimReturning('$4')}`,
    values: [opts.executorId, opts.limit, opts.leaseMs, opts.startedSchema ?? null],
  });
  return rows;
}

/**
 * The ready steps the hot claim would take next, without locking them: when a claim statement
 * fails as a whole, the executor claims these one at a time to find the row that fails it.
 */
export async function peekReadySteps(
  db: Queryable,
  limit: number,
  toollessOnly = false,
): Promise<{ id: string; workflow_id: string; name: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string; name: string }>({
    name: 'stepd_peek_ready_steps',
    text: `SELECT id, workflow_id, name FROM workflow_steps
            WHERE status = 'ready' AND ready_at <= now() AND NOT gated AND ${NOT_SIGNALLED} AND (NOT $2 OR tool IS NULL OR task_ended IS NOT NULL) ORDER BY ready_at, id LIMIT $1`,
    values: [limit, toollessOnly],
  });
  return rows;
}

/**
 * Limited claims of every executor on the schema take this lock for their transaction, so the
 * running rows each one counts include every other executor's claims (committed before it).
 * The lock is the `claim-limits` row of executor_leases (sql/0018), a table clients may not
 * lock (no privilege on it), not an advisory lock any connected role could take first. An
 * INSERT … ON CONFLICT DO UPDATE locks the existing row even when its WHERE holds for none, and
 * puts the row back should it be missing. `_schema`: the connection's search_path names it.
 */
export async function lockClaimLimits(db: Queryable, _schema: string): Promise<void> {
  await db.query({
    name: 'stepd_lock_claim_limits',
    text: `INSERT INTO executor_leases (name) VALUES ('claim-limits')
           ON CONFLICT (name) DO UPDATE SET updated_at = now() WHERE false`,
  });
}

/** Running tool steps on the whole database (worker tasks handed to workers too, sql/0027), by tool and user: what the limits count. */
export async function countRunningToolSteps(db: Queryable): Promise<{ tool: string; created_by: string | null; n: number }[]> {
  const { rows } = await db.query<{ tool: string; created_by: string | null; n: number }>({
    name: 'stepd_count_running_tool_steps',
    text: `SELECT s.tool, w.created_by, count(*)::int AS n
             FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
            WHERE (s.status = 'running' OR (s.status = 'pending' AND s.task_timeout_ms IS NOT NULL)) AND s.tool IS NOT NULL
            GROUP BY s.tool, w.created_by`,
  });
  return rows;
}

export async function extendLeasesIfRunning(
  db: Queryable,
  executorId: string,
  leases: { id: string; leaseMs: number }[],
): Promise<void> {
  if (leases.length === 0) return;
  await db.query({
    name: 'stepd_extend_leases_if_running',
    text: `UPDATE workflow_steps s SET updated_at = now(), lease_until = now() + u.ms * interval '1 millisecond'
             FROM unnest($2::bigint[], $3::bigint[]) AS u(id, ms)
            WHERE s.id = u.id AND s.status = 'running' AND s.executor_id = $1`,
    values: [executorId, leases.map((l) => l.id), leases.map((l) => l.leaseMs)],
  });
}

/** A step's lease, renewed from now: only while it is still running under this executor. */
export async function renewLeaseIfRunning(db: Queryable, v: { executorId: string; id: string; leaseMs: number }): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_renew_lease_if_running',
    text: `UPDATE workflow_steps SET updated_at = now(), lease_until = now() + $3 * interval '1 millisecond'
            WHERE id = $2 AND status = 'running' AND executor_id = $1`,
    values: [v.executorId, v.id, v.leaseMs],
  });
  return (rowCount ?? 0) > 0;
}

/** Graceful shutdown: hands running steps back without spending an attempt. */
export async function releaseStepsIfRunning(db: Queryable, executorId: string, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const { rowCount } = await db.query({
    name: 'stepd_release_steps_if_running',
    text: `UPDATE workflow_steps SET updated_at = now(), status = 'ready', ready_at = now(), started_at = NULL, lease_until = NULL, executor_id = NULL
            WHERE id = ANY($2::bigint[]) AND status = 'running' AND executor_id = $1`,
    values: [executorId, ids],
  });
  return rowCount ?? 0;
}

/** Of the given steps, those no longer running under this executor (cancelled, rescued). */
export async function findStepsNoLongerRunning(db: Queryable, executorId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_find_steps_no_longer_running',
    text: `SELECT id FROM workflow_steps WHERE id = ANY($2::bigint[]) AND NOT (status = 'running' AND executor_id = $1)`,
    values: [executorId, ids],
  });
  return rows.map((r) => r.id);
}

export async function findRunningStepsOfExecutor(db: Queryable, executorId: string): Promise<{ id: string; workflow_id: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string }>({
    name: 'stepd_find_running_steps_of_executor',
    text: `SELECT id, workflow_id FROM workflow_steps WHERE status = 'running' AND executor_id = $1`,
    values: [executorId],
  });
  return rows;
}

/** The leader's: running steps past their lease whose executor is not alive to answer for them (STEP_EXECUTOR_ALIVE). */
export async function findExpiredLeasesOfGoneExecutors(db: Queryable, limit: number): Promise<{ id: string; workflow_id: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string }>({
    name: 'stepd_find_expired_leases_of_gone_executors',
    text: `SELECT s.id, s.workflow_id FROM workflow_steps s
            WHERE s.status = 'running' AND s.lease_until < now() AND NOT ${STEP_EXECUTOR_ALIVE}
            ORDER BY s.lease_until LIMIT $1`,
    values: [limit],
  });
  return rows;
}

/**
 * Each executor's own: its running steps past their lease (it rescues those whose outcome it does
 * not hold). Not those settling a finished child's outcome (child_id set): the leader hands them
 * back to ready past their lease (handBackSettlingSubWorkflowSteps), which re-runs nothing.
 */
export async function findOwnStepsPastLease(db: Queryable, executorId: string, limit: number): Promise<{ id: string; workflow_id: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string }>({
    name: 'stepd_find_own_steps_past_lease',
    text: `SELECT id, workflow_id FROM workflow_steps
            WHERE status = 'running' AND executor_id = $1 AND lease_until < now() AND child_id IS NULL
            ORDER BY lease_until LIMIT $2`,
    values: [executorId, limit],
  });
  return rows;
}

/**
 * Gates and signal waits past their timeout, oldest deadline first; not a signal wait whose
 * workflow has a signal match deferred past a held row since before the deadline (sql/0042): that
 * signal came in time, and is delivered once the row is free.
 */
export async function findExpiredGates(db: Queryable, limit: number): Promise<{ id: string; workflow_id: string; name: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string; name: string }>({
    name: 'stepd_find_expired_gates',
    text: `SELECT id, workflow_id, name FROM workflow_steps s
            WHERE status = 'pending' AND expires_at < now()
              AND ((args -> 'signal') IS NULL OR NOT EXISTS (
                    SELECT 1 FROM signal_deferred_matches d WHERE d.workflow_id = s.workflow_id AND d.created_at <= s.expires_at))
            ORDER BY expires_at LIMIT $1`,
    values: [limit],
  });
  return rows;
}

/**
 * With limits configured, claiming takes two statements in one transaction: lock candidate
 * rows (skipping saturated tools and users), let the caller admit those its limits have room
 * for, and claim only those. The others are never touched and stay ready where they were.
 */
export async function lockClaimCandidates(
  db: Queryable,
  opts: { limit: number; skipToolsLike: string[]; skipUsers: string[] },
): Promise<ClaimCandidate[]> {
  const { rows } = await db.query<ClaimCandidate>({
    name: 'stepd_lock_claim_candidates',
    // Steps with a priority first (their own small index), then the oldest, as the hot claim.
    text: `WITH urgent AS (
             SELECT s.id, s.workflow_id, s.name, s.tool, w.created_by
               FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
              WHERE s.status = 'ready' AND s.priority > 0 AND NOT s.gated AND s.ready_at <= now() AND ${NOT_SIGNALLED_S}
                AND (cardinality($2::text[]) = 0 OR s.tool IS NULL OR NOT (s.tool LIKE ANY($2::text[])))
                AND (cardinality($3::text[]) = 0 OR w.created_by IS NULL OR NOT (w.created_by = ANY($3::text[])))
              ORDER BY s.priority DESC, s.ready_at, s.id LIMIT $1
                FOR UPDATE OF s SKIP LOCKED),
           oldest AS (
             SELECT s.id, s.workflow_id, s.name, s.tool, w.created_by
               FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
              WHERE s.status = 'ready' AND s.ready_at <= now() AND s.priority = 0 AND NOT s.gated AND ${NOT_SIGNALLED_S}
                AND (cardinality($2::text[]) = 0 OR s.tool IS NULL OR NOT (s.tool LIKE ANY($2::text[])))
                AND (cardinality($3::text[]) = 0 OR w.created_by IS NULL OR NOT (w.created_by = ANY($3::text[])))
              ORDER BY s.ready_at, s.id LIMIT $1
                FOR UPDATE OF s SKIP LOCKED)
           SELECT * FROM (SELECT * FROM urgent UNION ALL SELECT * FROM oldest) c LIMIT $1`,
    values: [opts.limit, opts.skipToolsLike, opts.skipUsers],
  });
  return rows;
}

/** A candidate of a limited claim: locked by this transaction, claimed only if the limits have room. */
export interface ClaimCandidate {
  id: string;
  workflow_id: string;
  name: string;
  tool: string | null;
  created_by: string | null;
}

/**
 * lockClaimCandidates, fairly: the candidates come from up to `workflows` workflows visited
 * round-robin after `after` (as in claimReadyStepsFairly), an equal share each, skipping
 * saturated tools and users like the plain one.
 */
export async function lockClaimCandidatesFairly(
  db: Queryable,
  opts: { limit: number; after: string; workflows: number; skipToolsLike: string[]; skipUsers: string[] },
): Promise<{ candidates: ClaimCandidate[]; lastVisited: string | null; visited: number }> {
  const { rows } = await db.query<ClaimCandidate & { last_visited: string | null; visited: number }>({
    name: 'stepd_lock_claim_candidates_fairly',
    text: `WITH RECURSIVE wf(id, n) AS (
             (SELECT workflow_id, 1 FROM workflow_steps
               WHERE status = 'ready' AND ready_at <= now() AND workflow_id > $2 ORDER BY workflow_id LIMIT 1)
             UNION ALL
             SELECT (SELECT s.workflow_id FROM workflow_steps s
                      WHERE s.status = 'ready' AND s.ready_at <= now() AND s.workflow_id > wf.id ORDER BY s.workflow_id LIMIT 1), wf.n + 1
               FROM wf WHERE wf.id IS NOT NULL AND wf.n < $3),
           visited AS (SELECT id FROM wf WHERE id IS NOT NULL),
           picked AS (
             SELECT p.id, p.workflow_id, p.name, p.tool, w.created_by, p.ready_at
               FROM visited v
               JOIN workflows w ON w.id = v.id
                AND (cardinality($5::text[]) = 0 OR w.created_by IS NULL OR NOT (w.created_by = ANY($5::text[])))
               CROSS JOIN LATERAL (
                      SELECT s.id, s.workflow_id, s.name, s.tool, s.ready_at FROM workflow_steps s
                       WHERE s.status = 'ready' AND s.ready_at <= now() AND s.workflow_id = v.id AND NOT s.gated AND ${NOT_SIGNALLED_S}
                         AND (cardinality($4::text[]) = 0 OR s.tool IS NULL OR NOT (s.tool LIKE ANY($4::text[])))
                       ORDER BY s.ready_at, s.id
                       LIMIT greatest(1, ceil($1::numeric / (SELECT count(*) FROM visited)))::int
                         FOR UPDATE OF s SKIP LOCKED) p
              ORDER BY p.ready_at, p.id LIMIT $1)
           SELECT p.id, p.workflow_id, p.name, p.tool, p.created_by, v.last_visited, v.visited
             FROM (SELECT max(id)::text AS last_visited, count(*)::int AS visited FROM visited) v
             LEFT JOIN picked p ON true
            ORDER BY p.ready_at, p.id`,
    values: [opts.limit, opts.after, opts.workflows, opts.skipToolsLike, opts.skipUsers],
  });
  const first = rows[0];
  const candidates = rows.filter((r) => r.id !== null).map(({ last_visited: _l, visited: _v, ...c }) => c);
  return { candidates, lastVisited: first?.last_visited ?? null, visited: first?.visited ?? 0 };
}

/** Claims steps this transaction has locked as candidates. */
export async function claimLockedSteps(
  db: Queryable,
  opts: ClaimBy & { ids: string[] },
): Promise<ClaimedStep[]> {
  if (opts.ids.length === 0) return [];
  const { rows } = await db.query<ClaimedStep>({
    name: 'stepd_claim_locked_steps',
    text: `WITH claimed AS (
             ${CLAIM_UPDATE}
              WHERE id = ANY($2::bigint[]) AND status = 'ready'
          ${claimReturning('$4')}`,
    values: [opts.executorId, opts.ids, opts.leaseMs, opts.startedSchema ?? null],
  });
  return rows;
}
