/**
 * Lanes: admission and claims fair across roles first, then users, then workflows.
 *
 * A role is `workflows.created_role` (the writing session_user; a sub-workflow copies its
 * parent's, so a whole tree is its top-level workflow's role); a user is `created_by`. Both
 * statements walk workflows_live_lane_idx (sql/0022) a role at a time, then a user of that role
 * at a time (skip scans), so one role's thousands of new or running workflows cost what one
 * lane costs: O(roles + users visited + batch) index probes, never O(backlog).
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import { CLAIM_UPDATE, claimedWithEvents, type ClaimBy, type ClaimCandidate, type ClaimedStep } from './claims.js';
import type { Queryable } from './common.js';
import { NOT_SIGNALLED_S, type ReadiedSignalWait } from './signalWaits.js';

/** A lane's key: NULL roles and users (rows written with the executor's marker) are one lane each. */
const ROLE = `coalesce(created_role, '')`;
const USER = `coalesce(created_by, '')`;

/**
 * The lanes of workflows in `status` (a constant of this module, never a value): up to `$maxRoles`
 * roles from `$fromRole` on (plus the one after them, the next round's start), each with an equal
 * share of `$limit`, and up to its share of users, each with an equal share of its role's.
 * Columns: r (role), n (its place), u (user), share (the user's).
 */
function lanesOf(status: 'new' | 'running', p: { limit: string; fromRole: string; maxRoles: string }): string {
  return `roles(r, n) AS (
             (SELECT ${ROLE}, 1 FROM workflows WHERE status = '${status}' AND ${ROLE} >= ${p.fromRole} ORDER BY ${ROLE} LIMIT 1)
             UNION ALL
             SELECT (SELECT coalesce(w.created_role, '') FROM workflows w
                      WHERE w.status = '${status}' AND coalesce(w.created_role, '') > roles.r ORDER BY coalesce(w.created_role, '') LIMIT 1), roles.n + 1
               FROM roles WHERE roles.r IS NOT NULL AND roles.n <= ${p.maxRoles}),
           role_lanes AS (
             SELECT r, n, ceil(${p.limit}::numeric / count(*) OVER ())::int AS share FROM roles WHERE r IS NOT NULL AND n <= ${p.maxRoles}),
           lanes AS (
             SELECT rl.r, rl.n, u.u, ceil(rl.share::numeric / count(*) OVER (PARTITION BY rl.r))::int AS share
               FROM role_lanes rl CROSS JOIN LATERAL (
                 WITH RECURSIVE users(u, k) AS (
                   (SELECT ${USER}, 1 FROM workflows WHERE status = '${status}' AND ${ROLE} = rl.r ORDER BY ${USER} LIMIT 1)
                   UNION ALL
                   SELECT (SELECT coalesce(w.created_by, '') FROM workflows w
                            WHERE w.status = '${status}' AND coalesce(w.created_role, '') = rl.r AND coalesce(w.created_by, '') > users.u
                            ORDER BY coalesce(w.created_by, '') LIMIT 1), users.k + 1
                     FROM users WHERE users.u IS NOT NULL AND users.k < rl.share)
                 SELECT u FROM users WHERE u IS NOT NULL) u)`;
}

/** Roles one admission visits at most (each gets at least one workflow when the batch has room). */
const ADMISSION_MAX_ROLES = 500;

/**
 * The `chosen(id)` CTE of admission: up to `$1` new workflows, those with a priority first (most
 * urgent, then oldest: workflows_new_priority_idx, sql/0028), then, within priority 0, each role an equal share (its
 * users equal shares of it), the oldest of each lane first, cut round-robin across roles starting
 * after role `$3` (the caller's cursor, so a batch smaller than the roles serves each in turn); a batch
 * the lanes leave short (a role with fewer new workflows than its share) is filled with the
 * oldest others, so one role alone still gets whole batches. Skips rows in `$2`, delayed rows
 * (`start_at`) and rows another executor holds. Locks what it picks (a lane may lock one row more
 * than the cut keeps; it stays new for the next batch).
 */
export const FAIR_NEW_WORKFLOWS = `${lanesOf('new', { limit: '$1', fromRole: `''`, maxRoles: String(ADMISSION_MAX_ROLES) })},
           urgent AS (
             SELECT id FROM workflows
              WHERE status = 'new' AND priority > 0 AND (start_at IS NULL OR start_at <= now()) AND id <> ALL($2::bigint[])
              ORDER BY priority DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED),
           fair AS (
             SELECT p.id, row_number() OVER (PARTITION BY l.r ORDER BY p.id) AS turn, l.r
               FROM lanes l CROSS JOIN LATERAL (
                 SELECT id FROM workflows
                  WHERE status = 'new' AND ${ROLE} = l.r AND ${USER} = l.u AND priority = 0
                    AND (start_at IS NULL OR start_at <= now()) AND id <> ALL($2::bigint[])
                  ORDER BY id LIMIT l.share FOR UPDATE SKIP LOCKED) p),
           fair_cut AS (SELECT id FROM fair ORDER BY turn, r > $3::text DESC, r LIMIT greatest(0, $1 - (SELECT count(*) FROM urgent))),
           fill AS (
             SELECT id FROM workflows
              WHERE status = 'new' AND priority = 0 AND (start_at IS NULL OR start_at <= now()) AND id <> ALL($2::bigint[])
                AND id <> ALL(ARRAY(SELECT id FROM fair_cut))
              ORDER BY id LIMIT greatest(0, $1 - (SELECT count(*) FROM urgent) - (SELECT count(*) FROM fair_cut)) FOR UPDATE SKIP LOCKED),
           chosen AS (SELECT id FROM urgent UNION ALL SELECT id FROM fair_cut UNION ALL SELECT id FROM fill)`;

/** Workflows of one user lane the role-fair claim looks at, newest first: a bound per lane, whatever its backlog. */
const LANE_VISIT_MIN = 16;
const LANE_VISIT_MAX = 64;

/**
 * The CTEs up to `cut(id, r)` of a role-fair pick of ready steps (see
 * claimReadyStepsFairlyAcrossRoles); with `skip`, the steps of saturated tools (`LIKE` patterns)
 * and the lanes of saturated users are left out, as a limited claim's are.
 */
function roleFairCut(p: { limit: string; fromRole: string; skip?: { toolsLike: string; users: string }; signalWaits?: boolean }): string {
  // The steps picked: those a claim takes, or (signalWaits) the readied signal waits no claim takes.
  const kind = p.signalWaits ? `s.tool IS NULL AND s.args -> 'signal' IS NOT NULL` : `NOT s.gated AND ${NOT_SIGNALLED_S}`;
  const toolOk = p.skip ? `AND (cardinality(${p.skip.toolsLike}::text[]) = 0 OR s.tool IS NULL OR NOT (s.tool LIKE ANY(${p.skip.toolsLike}::text[])))` : '';
  const userOk = p.skip ? `WHERE (cardinality(${p.skip.users}::text[]) = 0 OR l.u = '' OR l.u <> ALL(${p.skip.users}::text[]))` : '';
  return `${lanesOf('running', { limit: p.limit, fromRole: p.fromRole, maxRoles: p.limit })},
           lane_workflows AS (
             SELECT l.r, l.n, l.share, w.id, count(*) OVER (PARTITION BY l.r, l.u) AS m
               FROM lanes l CROSS JOIN LATERAL (
                 SELECT lw.id FROM (
                          SELECT id FROM workflows WHERE status = 'running' AND ${ROLE} = l.r AND ${USER} = l.u
                           ORDER BY id DESC LIMIT least(${LANE_VISIT_MAX}, greatest(${LANE_VISIT_MIN}, 4 * l.share))) lw
                  -- One probe of the ready index per workflow (a LATERAL with LIMIT: never a scan of every ready row).
                  CROSS JOIN LATERAL (
                    SELECT 1 FROM workflow_steps s WHERE s.status = 'ready' AND s.workflow_id = lw.id AND s.ready_at <= now() AND ${kind} ${toolOk}
                     ORDER BY s.workflow_id, s.ready_at LIMIT 1) ready
                  LIMIT l.share) w
              ${userOk}),
           candidates AS (
             SELECT c.id, lw.r, lw.n, row_number() OVER (PARTITION BY lw.r ORDER BY c.k, c.ready_at, c.id) AS turn
               FROM lane_workflows lw CROSS JOIN LATERAL (
                 SELECT s.id, s.ready_at, row_number() OVER (ORDER BY s.ready_at, s.id) AS k FROM (
                          SELECT s.id, s.ready_at FROM workflow_steps s
                           WHERE s.status = 'ready' AND s.ready_at <= now() AND s.workflow_id = lw.id AND ${kind} ${toolOk}
                           ORDER BY s.workflow_id, s.ready_at, s.id LIMIT ceil(lw.share::numeric / lw.m)::int) s) c),
           cut AS (SELECT id, r FROM candidates ORDER BY turn, n LIMIT ${p.limit})`;
}

/** Still ready, found by id: the status test is written so that no partial index of ready rows
 * can serve it (a plan on stale statistics would read every ready row instead). */
const STILL_READY = `s.status <> ALL ('{pending,running,done,failed,cancelled}'::text[]) AND s.ready_at <= now() AND NOT s.gated`;

export interface RoleFairClaim {
  rows: ClaimedStep[];
  /** Where the next role-fair claim starts (null: from the first role again). */
  nextRole: string | null;
  /** Roles whose ready steps this claim took. */
  rolesClaimed: number;
}

/**
 * The role-fair claim: up to `limit` ready steps from the running workflows of up to `limit`
 * roles, from `fromRole` on (a round-robin cursor kept by the caller), each role an equal share,
 * each of its users an equal share of that, spread over that user's workflows that have ready
 * steps (the newest first, at most 16–64 looked at per user), oldest steps first within a
 * workflow; cut round-robin across roles. The caller fills what is left with the hot claim.
 */
export async function claimReadyStepsFairlyAcrossRoles(
  db: Queryable,
  opts: ClaimBy & { limit: number; fromRole: string },
): Promise<RoleFairClaim> {
  const { rows } = await db.query<ClaimedStep & { next_role: string | null; roles_claimed: number }>({
    name: 'stepd_claim_ready_steps_fairly_across_roles',
    text: `WITH RECURSIVE ${roleFairCut({ limit: '$2', fromRole: '$4' })},
           picked AS (
             SELECT s.id FROM workflow_steps s WHERE s.id = ANY(ARRAY(SELECT id FROM cut)) AND ${STILL_READY}
                FOR UPDATE SKIP LOCKED),
           claimed AS (
             ${CLAIM_UPDATE}
              WHERE id IN (SELECT id FROM picked)
             RETURNING *),
           ${claimedWithEvents('$5')},
           summary AS (
             SELECT (SELECT r FROM roles WHERE n = $2 + 1) AS next_role,
                    (SELECT count(DISTINCT cut.r)::int FROM cut JOIN claimed c ON c.id = cut.id) AS roles_claimed)
           SELECT c.*, w.created_by, v.next_role, v.roles_claimed
             FROM summary v
             LEFT JOIN (claimed c JOIN workflows w ON w.id = c.workflow_id) ON true
            WHERE (SELECT n FROM started) >= 0`,
    values: [opts.executorId, opts.limit, opts.leaseMs, opts.fromRole, opts.startedSchema ?? null],
  });
  const first = rows[0];
  const claimed = rows.filter((r) => r.id !== null).map(({ next_role: _n, roles_claimed: _r, ...row }) => row as ClaimedStep);
  return { rows: claimed, nextRole: first?.next_role ?? null, rolesClaimed: first?.roles_claimed ?? 0 };
}

/**
 * The candidates of a limited claim, fairly across roles (as claimReadyStepsFairlyAcrossRoles,
 * the steps of saturated tools and the lanes of saturated users left out), locked for the
 * caller to claim those its limits have room for.
 */
export async function lockClaimCandidatesFairlyAcrossRoles(
  db: Queryable,
  opts: { limit: number; fromRole: string; skipToolsLike: string[]; skipUsers: string[] },
): Promise<{ candidates: ClaimCandidate[]; nextRole: string | null; rolesLocked: number }> {
  const { rows } = await db.query<ClaimCandidate & { next_role: string | null; roles_locked: number }>({
    name: 'stepd_lock_claim_candidates_fairly_across_roles',
    text: `WITH RECURSIVE ${roleFairCut({ limit: '$1', fromRole: '$2', skip: { toolsLike: '$3', users: '$4' } })},
           locked AS (
             SELECT s.id, s.workflow_id, s.name, s.tool, s.ready_at FROM workflow_steps s
              WHERE s.id = ANY(ARRAY(SELECT id FROM cut)) AND ${STILL_READY}
                FOR UPDATE OF s SKIP LOCKED)
           SELECT l.id, l.workflow_id, l.name, l.tool, w.created_by, v.next_role, v.roles_locked
             FROM (SELECT (SELECT r FROM roles WHERE n = $1 + 1) AS next_role,
                          (SELECT count(DISTINCT cut.r)::int FROM cut JOIN locked ON locked.id = cut.id) AS roles_locked) v
             LEFT JOIN (locked l JOIN workflows w ON w.id = l.workflow_id) ON true
            ORDER BY l.ready_at, l.id`,
    values: [opts.limit, opts.fromRole, opts.skipToolsLike, opts.skipUsers],
  });
  const first = rows[0];
  const candidates = rows.filter((r) => r.id !== null).map(({ next_role: _n, roles_locked: _r, ...c }) => c);
  return { candidates, nextRole: first?.next_role ?? null, rolesLocked: first?.roles_locked ?? 0 };
}

/**
 * Readied signal waits picked fairly across roles, as the role-fair claim picks ready steps (from
 * `fromRole` on, the newest 16–64 running workflows of each user lane looked at), without locking
 * them; those in `excluding` (on their way already) left out. The signal pickup's look after a
 * full one (signalPickup.ts), so one role's flood of signals never holds another role's wake-up
 * behind it. `nextRole`: where the next such look starts (null: from the first role again).
 */
export async function peekReadiedSignalWaitsFairly(
  db: Queryable,
  opts: { limit: number; fromRole: string; excluding: string[] },
): Promise<{ rows: ReadiedSignalWait[]; nextRole: string | null }> {
  const { rows } = await db.query<ReadiedSignalWait & { next_role: string | null }>({
    name: 'stepd_peek_readied_signal_waits_fairly',
    text: `WITH RECURSIVE ${roleFairCut({ limit: '$1', fromRole: '$2', signalWaits: true })}
           SELECT s.id::text AS id, s.workflow_id::text AS workflow_id, s.name, s.attempt, s.result, w.created_by, w.created_role,
                  (SELECT r FROM roles WHERE n = $1 + 1) AS next_role
             FROM cut JOIN workflow_steps s ON s.id = cut.id JOIN workflows w ON w.id = s.workflow_id
            WHERE s.id <> ALL ($3::bigint[])
            ORDER BY s.ready_at, s.id`,
    values: [opts.limit, opts.fromRole, opts.excluding],
  });
  return { rows: rows.map(({ next_role: _n, ...row }) => row), nextRole: rows[0]?.next_role ?? null };
}
