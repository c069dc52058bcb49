/**
 * Statements for sub-workflows (sql/0011): starting a child for a step, and handing back a
 * claimed step that was settling a finished child when its executor went away.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import { jsonParam, type Queryable } from './common.js';

export interface ChildWorkflowStart {
  /** The parent workflow (locked by the caller, running) and its step that waits. */
  parentId: string;
  stepId: string;
  /** The registered flow, copied into the child and pinned. */
  name: string;
  flow: unknown;
  version: number;
  input: Record<string, unknown>;
  /** The deepest a child may be (caps.subWorkflowDepth). */
  maxDepth: number;
  /** The schema, for the wake-up payload (the executors' own inserts are not announced by the trigger). */
  schema: string;
}

/**
 * Inserts the child workflow (status new, the parent's created_by and created_role, depth + 1,
 * the tree's root as root_id, and its priority)
 * unless that depth is above `maxDepth`, and makes the step wait for it: pending, child_id set,
 * no owner and no lease. NOTIFYs the wake-up so an executor admits the child at once. Returns
 * the child's id, or the parent's depth when the child would be too deep.
 */
export async function insertChildWorkflowUnlessTooDeep(
  db: Queryable,
  c: ChildWorkflowStart,
): Promise<{ childId: string; depth: number } | { childId: null; parentDepth: number }> {
  const { rows } = await db.query<{ child_id: string | null; depth: number }>({
    name: 'stepd_insert_child_workflow_unless_too_deep',
    text: `WITH parent AS (
             SELECT id, created_by, created_role, depth, root_id, priority FROM workflows WHERE id = $1),
           child AS (
             INSERT INTO workflows (name, flow, flow_version, input, created_by, created_role, parent_id, parent_step_id, depth, root_id, priority)
             SELECT $3, $4::jsonb, $5, $6::jsonb, p.created_by, p.created_role, p.id, $2, p.depth + 1, coalesce(p.root_id, p.id), p.priority
               FROM parent p WHERE p.depth + 1 <= $7
             RETURNING id, depth),
           waiting AS (
             UPDATE workflow_steps s SET updated_at = now(), status = 'pending', child_id = c.id,
                    executor_id = NULL, lease_until = NULL, ready_at = NULL
               FROM child c WHERE s.id = $2
             RETURNING s.id),
           woke AS (
             SELECT count(*) AS n FROM (
               SELECT pg_notify('stepd_wakeup', json_build_object('schema', $8::text, 'table', 'workflows', 'id', c.id, 'status', 'new')::text)
                 FROM child c) x)
           SELECT (SELECT id::text FROM child) AS child_id,
                  coalesce((SELECT depth FROM child), (SELECT depth FROM parent)) AS depth,
                  (SELECT count(*) FROM waiting) + (SELECT n FROM woke) AS touched`,
    values: [c.parentId, c.stepId, c.name, jsonParam(c.flow), c.version, jsonParam(c.input), c.maxDepth, c.schema],
  });
  const row = rows[0];
  if (row?.child_id) return { childId: row.child_id, depth: row.depth };
  return { childId: null, parentDepth: row?.depth ?? 0 };
}

/**
 * A claimed step of a running workflow, locked, if it is still running under `executorId`:
 * the fence of starting a child for a step claimed ready (a retry, or an attempt a redrive made).
 */
export async function lockStepIfRunningUnder(
  db: Queryable,
  v: { stepId: string; executorId: string },
): Promise<{ id: string; workflow_id: string; child_id: string | null } | undefined> {
  const { rows } = await db.query<{ id: string; workflow_id: string; child_id: string | null }>({
    name: 'stepd_lock_step_if_running_under',
    text: `SELECT id::text, workflow_id::text, child_id::text FROM workflow_steps
            WHERE id = $1 AND status = 'running' AND executor_id = $2 FOR UPDATE`,
    values: [v.stepId, v.executorId],
  });
  return rows[0];
}

/**
 * Steps claimed to record a finished child's outcome (running, child_id set) whose executor is
 * gone: with `own`, `executorId`'s (at its start-up, after a crash); with `stranded`, any past
 * its lease or of another executor that stopped heartbeating (the watchdog's sweep). They go back to ready without spending an attempt — the
 * child's outcome is still on the row, so the step settles from it once, and no new child starts
 * (failing them as `lost` would retry the whole child). Returns how many were handed back.
 */
export async function handBackSettlingSubWorkflowSteps(db: Queryable, v: { executorId: string; whose: 'own' | 'stranded' }): Promise<number> {
  const { rowCount } = await db.query({
    name: 'stepd_hand_back_settling_sub_workflow_steps',
    text: `UPDATE workflow_steps s SET updated_at = now(), status = 'ready', ready_at = now(), started_at = NULL,
                  lease_until = NULL, executor_id = NULL
            WHERE s.status = 'running' AND s.child_id IS NOT NULL
              AND CASE WHEN $2 = 'own' THEN s.executor_id = $1
                       ELSE s.lease_until < now()
                            OR EXISTS (SELECT 1 FROM executors e
                                        WHERE e.id = s.executor_id AND e.id <> $1
                                          AND e.last_beat_at < now() - e.dead_after_ms * interval '1 millisecond'
                                          AND pg_postmaster_start_time() < now() - e.dead_after_ms * interval '1 millisecond') END`,
    values: [v.executorId, v.whose],
  });
  return rowCount ?? 0;
}

/**
 * What starting a child of `parentId` needs, in one read: the parent's depth, how many child
 * workflows its tree has (every workflow whose root_id is the parent's root; caps.subWorkflows),
 * and the registered flow (`version` null: the latest), with the latest version for the message
 * when it is missing.
 */
export async function getParentDepthAndRegisteredFlow(
  db: Queryable,
  v: { parentId: string; name: string; version: number | null },
): Promise<{ parentDepth: number; treeChildren: number; flow?: { version: number; flow: unknown }; latest: number | null } | undefined> {
  const { rows } = await db.query<{ depth: number; tree_children: number; version: number | null; flow: unknown; latest: number | null }>({
    name: 'stepd_get_parent_depth_tree_and_registered_flow',
    text: `SELECT w.depth, (SELECT count(*)::int FROM workflows d WHERE d.root_id = coalesce(w.root_id, w.id)) AS tree_children,
                  f.version, f.flow, (SELECT max(version) FROM flows WHERE name = $2) AS latest
             FROM workflows w
             LEFT JOIN LATERAL (
               SELECT version, flow FROM flows
                WHERE name = $2 AND ($3::integer IS NULL OR version = $3::integer)
                ORDER BY version DESC LIMIT 1) f ON true
            WHERE w.id = $1`,
    values: [v.parentId, v.name, v.version],
  });
  const row = rows[0];
  if (!row) return undefined;
  return {
    parentDepth: row.depth,
    treeChildren: row.tree_children,
    ...(row.version !== null ? { flow: { version: row.version, flow: row.flow } } : {}),
    latest: row.latest,
  };
}
