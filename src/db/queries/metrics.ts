/**
 * What /metrics reads from the database at scrape time. Each count is capped (it stops at the
 * cap, so a scrape costs at most that many index entries whatever the backlog) and served by
 * an index: workflows_new_idx and workflows_status_created_idx for the statuses,
 * workflow_steps_ready_idx (partial on status = 'ready') for the ready queue. The caller runs
 * them under a statement timeout on a connection of its own (src/telemetry/databaseGauges.ts).
 */
import type { CapacityGauges } from './capacity.js';
import type { Queryable } from './common.js';

export const WORKFLOW_STATUSES = ['new', 'running', 'completed', 'failed', 'cancelled'] as const;

export interface QueueGauges {
  /** Workflows per status, each count stopping at its cap. */
  workflows: Record<(typeof WORKFLOW_STATUSES)[number], number>;
  /** Steps ready to be claimed now (ready_at reached), stopping at the cap. */
  readySteps: number;
  /** Seconds the oldest step ready now has waited; 0 when none waits. */
  oldestReadySeconds: number;
  /** Ready steps held by keys and rates (capacity.ts readCapacityGauges). */
  capacity?: CapacityGauges;
  /** Gates waiting for an approval (pending steps that wait for no child and no signal), stopping at the cap. */
  gatesWaiting: number;
  /** Seconds the oldest waiting gate has waited; 0 when none waits. */
  oldestGateSeconds: number;
}

export interface QueueGaugeCaps {
  /** Cap of the `new` and `running` counts and of the ready queue. */
  live: number;
  /** Cap of the `completed`, `failed` and `cancelled` counts (they only grow). */
  finished: number;
}

/** The workflow counts by status and the ready queue, each count bounded by its cap, in one statement. */
export async function readQueueGaugesCapped(db: Queryable, caps: QueueGaugeCaps): Promise<QueueGauges> {
  const { rows } = await db.query<{ status: string; n: number }>({
    name: 'stepd_metrics_queue_gauges',
    text: `SELECT s.status,
                  (SELECT count(*) FROM (SELECT 1 FROM workflows w WHERE w.status = s.status
                                          LIMIT CASE WHEN s.status IN ('new', 'running') THEN $1::int ELSE $2::int END) c)::int AS n
             FROM unnest(ARRAY['new', 'running', 'completed', 'failed', 'cancelled']) AS s(status)
           UNION ALL
           SELECT 'ready', (SELECT count(*) FROM (SELECT 1 FROM workflow_steps
                                                   WHERE status = 'ready' AND ready_at <= now() LIMIT $1::int) r)::int
           UNION ALL
           SELECT 'oldest', coalesce((SELECT extract(epoch FROM now() - min(ready_at))
                                        FROM workflow_steps WHERE status = 'ready' AND ready_at <= now()), 0)::float8
           UNION ALL
           SELECT 'gates', (SELECT count(*) FROM (SELECT 1 FROM workflow_steps
                                                   WHERE ${WAITING_GATE} LIMIT $1::int) g)::int
           UNION ALL
           SELECT 'oldest_gate', coalesce((SELECT extract(epoch FROM now() - min(created_at))
                                             FROM workflow_steps WHERE ${WAITING_GATE}), 0)::float8`,
    values: [caps.live, caps.finished],
  });
  const byName = new Map(rows.map((r) => [r.status, Number(r.n)]));
  const workflows = Object.fromEntries(WORKFLOW_STATUSES.map((s) => [s, byName.get(s) ?? 0])) as QueueGauges['workflows'];
  return {
    workflows,
    readySteps: byName.get('ready') ?? 0,
    oldestReadySeconds: Math.max(0, byName.get('oldest') ?? 0),
    gatesWaiting: byName.get('gates') ?? 0,
    oldestGateSeconds: Math.max(0, byName.get('oldest_gate') ?? 0),
  };
}

/**
 * A gate waiting for its approval: pending, waiting for no child and no signal (as listWorkflows counts them). Served
 * by workflow_steps_waiting_gates_idx (sql/0033). A constant (no value is built in).
 */
const WAITING_GATE = `status = 'pending' AND child_id IS NULL AND (args -> 'signal') IS NULL`;

export interface FinishedWorkflow {
  id: string;
  name: string;
  status: 'completed' | 'failed' | 'cancelled';
  /** Seconds from its start (its creation when it never started) to its end. */
  seconds: number;
  /** When it ended, as an ISO string (a redriven workflow ends again later). */
  ended_at: string;
}

/** The rows of these workflows that have finished (the others are left out): name, status, duration. Read-only; at most `ids.length` rows. */
export async function readFinishedWorkflowsByIds(db: Queryable, ids: readonly string[]): Promise<FinishedWorkflow[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ id: string; name: string; status: FinishedWorkflow['status']; seconds: number; ended_at: Date }>({
    name: 'stepd_metrics_finished_workflows_by_ids',
    text: `SELECT id::text, name, status,
                  greatest(0, extract(epoch FROM coalesce(completed_at, cancelled_at) - coalesce(started_at, created_at)))::float8 AS seconds,
                  coalesce(completed_at, cancelled_at) AS ended_at
             FROM workflows
            WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'cancelled')
              AND coalesce(completed_at, cancelled_at) IS NOT NULL`,
    values: [ids],
  });
  return rows.map((r) => ({ id: r.id, name: r.name, status: r.status, seconds: Number(r.seconds), ended_at: new Date(r.ended_at).toISOString() }));
}
