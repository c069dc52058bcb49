/**
 * The read side for the CLI (status, list, watch): typed Kysely queries over a client pool,
 * whose search_path is the stepd schema (see connect.ts). Nothing here writes.
 */
import { sql, type Kysely } from 'kysely';
import type { Database, StepRow, WorkflowRow, WorkflowStatus } from './tables.js';

export async function getWorkflow(db: Kysely<Database>, id: string): Promise<WorkflowRow | undefined> {
  return db.selectFrom('workflows').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function getWorkflowByKey(db: Kysely<Database>, key: string): Promise<WorkflowRow | undefined> {
  return db.selectFrom('workflows').selectAll().where('key', '=', key).executeTakeFirst();
}

/** Every step row of a workflow (every attempt), oldest first. */
export async function getWorkflowSteps(db: Kysely<Database>, workflowId: string): Promise<StepRow[]> {
  return db.selectFrom('workflow_steps').selectAll().where('workflow_id', '=', workflowId).orderBy('id').execute();
}

export type StepWithWorkflow = StepRow & { workflow_name: string; workflow_status: WorkflowStatus };

export async function getStepWithWorkflow(db: Kysely<Database>, stepId: string): Promise<StepWithWorkflow | undefined> {
  return db
    .selectFrom('workflow_steps as s')
    .innerJoin('workflows as w', 'w.id', 's.workflow_id')
    .selectAll('s')
    .select(['w.name as workflow_name', 'w.status as workflow_status'])
    .where('s.id', '=', stepId)
    .executeTakeFirst();
}

/** A workflow row without its flow and input: what an event about it is checked against. */
export type EventWorkflowRow = Omit<WorkflowRow, 'flow' | 'input'>;

/** The rows of these workflows (events name them), in one statement. */
export async function getWorkflowsForEvents(db: Kysely<Database>, ids: readonly string[]): Promise<EventWorkflowRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('workflows')
    .select([
      'id', 'name', 'status', 'output', 'error', 'created_by', 'created_role', 'key', 'created_at', 'updated_at', 'started_at', 'completed_at',
      'cancelled_at', 'deadline_at', 'step_count', 'flow_version', 'start_at', 'parent_id', 'parent_step_id', 'depth', 'redrive_requested_at', 'redrives', 'usage',
    ])
    .where('id', 'in', [...ids])
    .execute();
}

/** A step row as an event is checked against it (`args` only for a gate: its message). */
export type EventStepRow = Pick<StepRow, 'id' | 'workflow_id' | 'name' | 'tool' | 'status' | 'attempt' | 'item_index' | 'args' | 'error' | 'progress' | 'created_at' | 'started_at' | 'completed_at' | 'updated_at'>;

/** The rows of these step attempts (events name them), in one statement. */
export async function getStepsForEvents(db: Kysely<Database>, ids: readonly string[]): Promise<EventStepRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('workflow_steps')
    .select(['id', 'workflow_id', 'name', 'tool', 'status', 'attempt', 'item_index', 'error', 'progress', 'created_at', 'started_at', 'completed_at', 'updated_at'])
    .select(sql<unknown>`CASE WHEN tool IS NULL THEN args END`.as('args'))
    .where('id', 'in', [...ids])
    .execute();
}

export type WorkflowSummary = Pick<
  WorkflowRow,
  'id' | 'name' | 'status' | 'created_by' | 'key' | 'error' | 'created_at' | 'started_at' | 'completed_at' | 'cancelled_at' | 'step_count' | 'parent_id' | 'forked_from'
> & { waiting: number };

export interface WorkflowListFilter {
  status?: WorkflowStatus;
  name?: string;
  /** The user the workflow runs as (created_by). */
  createdBy?: string;
  /** Created at or after / before this instant. */
  createdAfter?: Date;
  createdBefore?: Date;
  limit: number;
  /** Only top-level workflows (no parent): the dashboard nests sub-workflows under theirs. */
  topLevel?: boolean;
  /** Only the sub-workflows of these top-level workflows (any depth, by root_id). */
  rootIds?: string[];
}

/** Newest first; `waiting` counts the gates waiting for approval, in the workflow and its sub-workflows. */
export async function listWorkflows(db: Kysely<Database>, opts: WorkflowListFilter): Promise<WorkflowSummary[]> {
  let q = db
    .selectFrom('workflows as w')
    .select(['w.id', 'w.name', 'w.status', 'w.created_by', 'w.key', 'w.error', 'w.created_at', 'w.started_at', 'w.completed_at', 'w.cancelled_at', 'w.step_count', 'w.parent_id', 'w.forked_from'])
    // Gates waiting in the workflow or any of its sub-workflows (a step waiting for a child or for a signal is no gate).
    .select(
      sql<number>`(WITH RECURSIVE tree(id) AS (
                     SELECT w.id UNION ALL SELECT c.id FROM workflows c JOIN tree ON c.parent_id = tree.id)
                   SELECT count(*)::int FROM workflow_steps s JOIN tree ON s.workflow_id = tree.id
                    WHERE s.status = 'pending' AND s.child_id IS NULL AND s.args -> 'signal' IS NULL)`.as('waiting'),
    )
    .orderBy('w.id', 'desc')
    .limit(opts.limit);
  if (opts.status) q = q.where('w.status', '=', opts.status);
  if (opts.name) q = q.where('w.name', '=', opts.name);
  if (opts.createdBy) q = q.where('w.created_by', '=', opts.createdBy);
  if (opts.createdAfter) q = q.where('w.created_at', '>=', opts.createdAfter);
  if (opts.createdBefore) q = q.where('w.created_at', '<', opts.createdBefore);
  if (opts.topLevel) q = q.where('w.parent_id', 'is', null);
  if (opts.rootIds) q = q.where('w.root_id', 'in', opts.rootIds.length ? opts.rootIds : ['0']);
  const rows = await q.execute();
  return rows.map((r) => ({ ...r, waiting: Number(r.waiting ?? 0) }));
}

/**
 * Whether `schema` exists but this connection's role may not use it (it was granted no
 * `<schema>_client`): its tables are then invisible, not missing.
 */
export async function schemaHiddenFromRole(db: Kysely<Database>, schema: string): Promise<{ role: string } | undefined> {
  const { rows } = await sql<{ role: string; usable: boolean }>`
    SELECT session_user AS role, has_schema_privilege(n.oid, 'USAGE') AS usable FROM pg_namespace n WHERE n.nspname = ${schema}`.execute(db);
  const row = rows[0];
  return row && !row.usable ? { role: row.role } : undefined;
}

/** Whether the stepd tables exist in the pool's schema (the database is set up). */
export async function hasStepdTables(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ ok: boolean }>`SELECT to_regclass('workflows') IS NOT NULL AND to_regclass('workflow_steps') IS NOT NULL AS ok`.execute(db);
  return rows[0]?.ok === true;
}

/**
 * Every sub-workflow below `workflowId` (children, their children, …; at most `limit`) with its
 * step rows, for the status tree.
 */
export async function getSubWorkflowTree(db: Kysely<Database>, workflowId: string, limit = 1000): Promise<{ workflow: WorkflowRow; steps: StepRow[] }[]> {
  const { rows: workflows } = await sql<WorkflowRow>`
    WITH RECURSIVE below AS (
      SELECT w.* FROM workflows w WHERE w.parent_id = ${workflowId}
      UNION ALL
      SELECT c.* FROM workflows c JOIN below b ON c.parent_id = b.id)
    SELECT * FROM below ORDER BY id LIMIT ${limit}`.execute(db);
  if (workflows.length === 0) return [];
  const ids = workflows.map((w) => String(w.id));
  const steps = await db.selectFrom('workflow_steps').selectAll().where('workflow_id', 'in', ids).orderBy('id').execute();
  return workflows.map((w) => ({ workflow: w, steps: steps.filter((s) => String(s.workflow_id) === String(w.id)) }));
}
