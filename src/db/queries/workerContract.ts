/**
 * The worker contract's calls (DESIGN.md §4b, sql/0027): SECURITY DEFINER functions a member of
 * `<schema>_worker` may call, and nothing else. Each call is one autocommit statement with no
 * session state, so it works through PgBouncer in transaction mode: the schema is written into
 * the statement (a checked identifier, never a value), not set through search_path. Every call
 * but take_tasks is fenced on the task's token; a refusal is an error from the database.
 */
import type { Queryable } from './common.js';
import { jsonParam } from './common.js';

/** A task as take_tasks hands it over. */
export interface WorkerTask {
  stepId: string;
  /** The fencing token: every later call names it; once the step is taken again it is refused. */
  token: string;
  tool: string;
  args: unknown;
  workflowId: string;
  attempt: number;
  user: string | null;
  idempotencyKey: string;
  /** When the step times out (null: no timeout). */
  deadline: Date | null;
}

interface TaskRow {
  step_id: string | number;
  token: unknown;
  tool: string;
  args: unknown;
  workflow_id: string | number;
  attempt: number;
  user: string | null;
  idempotency_key: string;
  deadline: Date | string | null;
}

/** `<schema>.` for statements, from a name checked by the caller (assertSchemaName). */
const qualified = (schema: string, fn: string) => `"${schema}".${fn}`;

const interval = (ms: number) => `${Math.max(1, Math.round(ms))} milliseconds`;

/** Claims up to `max` ready tasks of these tools (names or patterns like 'billing.*') for `leaseMs`. */
export async function takeTasks(db: Queryable, schema: string, opts: { tools: readonly string[]; max: number; leaseMs: number }): Promise<WorkerTask[]> {
  const { rows } = await db.query<TaskRow>({
    text: `SELECT * FROM ${qualified(schema, 'take_tasks')}($1::text[], $2::int, $3::interval)`,
    values: [opts.tools, opts.max, interval(opts.leaseMs)],
  });
  return rows.map((r) => ({
    stepId: String(r.step_id),
    token: String(r.token),
    tool: r.tool,
    args: r.args,
    workflowId: String(r.workflow_id),
    attempt: Number(r.attempt),
    user: r.user ?? null,
    idempotencyKey: r.idempotency_key,
    deadline: r.deadline === null || r.deadline === undefined ? null : new Date(r.deadline),
  }));
}

/** Records the task's result (the executor advances the workflow); refused when the token is stale. */
export async function finishTaskWithToken(db: Queryable, schema: string, task: { stepId: string; token: string }, result: unknown): Promise<void> {
  await db.query({ text: `SELECT ${qualified(schema, 'finish_task')}($1::bigint, $2, $3::jsonb)`, values: [task.stepId, task.token, jsonParam(result ?? null)] });
}

/**
 * Records several tasks' results in one call and one commit (finish_tasks, sql/0037). All or
 * nothing: one stale token (55000) or oversized result (54000) refuses the whole call, nothing
 * changed; the caller then reports them one by one (finishTaskWithToken) to learn which.
 */
export async function finishTasksWithTokens(db: Queryable, schema: string, done: readonly { task: { stepId: string; token: string }; result: unknown }[]): Promise<void> {
  await db.query({
    text: `SELECT ${qualified(schema, 'finish_tasks')}($1::bigint[], $2::uuid[], $3::jsonb[])`,
    values: [done.map((d) => d.task.stepId), done.map((d) => d.task.token), done.map((d) => jsonParam(d.result ?? null))],
  });
}

/** Records the task's failure ({code, message, retryable, details}); refused when the token is stale. */
export async function failTaskWithToken(db: Queryable, schema: string, task: { stepId: string; token: string }, error: unknown): Promise<void> {
  await db.query({ text: `SELECT ${qualified(schema, 'fail_task')}($1::bigint, $2, $3::jsonb)`, values: [task.stepId, task.token, jsonParam(error)] });
}

/** What extend_task (and progress_task) answer: 'ok' (here 'extended'), or 'cancelled': stop the work, report nothing. */
export type ExtendAnswer = 'extended' | 'cancelled';

/** Extends the task's lease by `leaseMs`; refused when the token is stale. */
export async function extendTaskWithToken(db: Queryable, schema: string, task: { stepId: string; token: string }, leaseMs: number): Promise<ExtendAnswer> {
  const { rows } = await db.query<{ answer: unknown }>({
    text: `SELECT ${qualified(schema, 'extend_task')}($1::bigint, $2, $3::interval)::text AS answer`,
    values: [task.stepId, task.token, interval(leaseMs)],
  });
  return String(rows[0]?.answer ?? '') === 'cancelled' ? 'cancelled' : 'extended';
}

/** Keeps the task's latest progress on its step row; answers like extend_task; refused when the token is stale. */
export async function progressTaskWithToken(db: Queryable, schema: string, task: { stepId: string; token: string }, progress: unknown): Promise<ExtendAnswer> {
  const { rows } = await db.query<{ answer: unknown }>({
    text: `SELECT ${qualified(schema, 'progress_task')}($1::bigint, $2, $3::jsonb)::text AS answer`,
    values: [task.stepId, task.token, jsonParam(progress)],
  });
  return String(rows[0]?.answer ?? '') === 'cancelled' ? 'cancelled' : 'extended';
}
