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

/** Start and end of one step attempt and its place in a fan-out (to describe its events). */
export async function getStepTiming(
  db: Kysely<Database>,
  stepId: string,
): Promise<Pick<StepRow, 'tool' | 'created_at' | 'started_at' | 'completed_at' | 'item_index'> | undefined> {
  return db.selectFrom('workflow_steps').select(['tool', 'created_at', 'started_at', 'completed_at', 'item_index']).where('id', '=', stepId).executeTakeFirst();
}

/** The gate row a `step.waiting` event is about: the newest pending row of that step. */
export async function findPendingStep(db: Kysely<Database>, workflowId: string, name: string): Promise<Pick<StepRow, 'id' | 'expires_at'> | undefined> {
  return db
    .selectFrom('workflow_steps')
    .select(['id', 'expires_at'])
    .where('workflow_id', '=', workflowId)
    .where('name', '=', name)
    .where('status', '=', 'pending')
    .orderBy('id', 'desc')
    .executeTakeFirst();
}

export type WorkflowSummary = Pick<
  WorkflowRow,
  'id' | 'name' | 'status' | 'created_by' | 'key' | 'error' | 'created_at' | 'started_at' | 'completed_at' | 'cancelled_at' | 'step_count'
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
}

/** Newest first; `waiting` counts the gates waiting for approval. */
export async function listWorkflows(db: Kysely<Database>, opts: WorkflowListFilter): Promise<WorkflowSummary[]> {
  let q = db
    .selectFrom('workflows as w')
    .select(['w.id', 'w.name', 'w.status', 'w.created_by', 'w.key', 'w.error', 'w.created_at', 'w.started_at', 'w.completed_at', 'w.cancelled_at', 'w.step_count'])
    .select((eb) =>
      eb
        .selectFrom('workflow_steps as s')
        .select((e) => e.cast<number>(e.fn.countAll(), 'integer').as('n'))
        .whereRef('s.workflow_id', '=', 'w.id')
        .where('s.status', '=', 'pending')
        .as('waiting'),
    )
    .orderBy('w.id', 'desc')
    .limit(opts.limit);
  if (opts.status) q = q.where('w.status', '=', opts.status);
  if (opts.name) q = q.where('w.name', '=', opts.name);
  if (opts.createdBy) q = q.where('w.created_by', '=', opts.createdBy);
  if (opts.createdAfter) q = q.where('w.created_at', '>=', opts.createdAfter);
  if (opts.createdBefore) q = q.where('w.created_at', '<', opts.createdBefore);
  const rows = await q.execute();
  return rows.map((r) => ({ ...r, waiting: Number(r.waiting ?? 0) }));
}

/** Whether the stepd tables exist in the pool's schema (the database is set up). */
export async function hasStepdTables(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ ok: boolean }>`SELECT to_regclass('workflows') IS NOT NULL AND to_regclass('workflow_steps') IS NOT NULL AS ok`.execute(db);
  return rows[0]?.ok === true;
}
