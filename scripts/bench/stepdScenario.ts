/**
 * What the stepd scenarios share: the schema under test, a client pool (no executor marker,
 * like any other service), the executor process, and waiting for workflows to finish.
 */
import type pg from 'pg';
import type { ExecutorProcess } from './executorProcess.js';
import { pollUntil, TimeoutError, type Row } from './pg.js';

export interface StepdContext {
  url: string;
  schema: string;
  db: pg.Pool;
  executor: ExecutorProcess;
  timeoutMs: number;
}

/** `schema.table`, for the harness's own statements (the schema name is generated, never input). */
export function tables(schema: string): { workflows: string; steps: string } {
  return { workflows: `${schema}.workflows`, steps: `${schema}.workflow_steps` };
}

export async function query<R = Row>(ctx: StepdContext, text: string, values?: unknown[]): Promise<R[]> {
  return (await ctx.db.query(text, values)).rows as R[];
}

/**
 * Inserts `count` workflows with one multi-row INSERT and returns the first and last id.
 * Each workflow gets `input` (the same for all).
 */
export async function insertWorkflows(ctx: StepdContext, name: string, flow: unknown, count: number, input: unknown = {}): Promise<{ first: string; last: string }> {
  const { workflows } = tables(ctx.schema);
  const rows = await query<{ first: string; last: string }>(
    ctx,
    `WITH ins AS (INSERT INTO ${workflows} (name, flow, input, created_by)
                  SELECT $1, $2::jsonb, $3::jsonb, 'bench' FROM generate_series(1, $4::int) RETURNING id)
     SELECT min(id)::text AS first, max(id)::text AS last FROM ins`,
    [name, JSON.stringify(flow), JSON.stringify(input), count],
  );
  return rows[0]!;
}

export interface FinishedCounts {
  completed: number;
  failed: number;
  cancelled: number;
  live: number;
}

export async function countByStatus(ctx: StepdContext, name: string): Promise<FinishedCounts> {
  const { workflows } = tables(ctx.schema);
  const [r] = await query<FinishedCounts>(
    ctx,
    `SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed,
            count(*) FILTER (WHERE status = 'failed')::int AS failed,
            count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
            count(*) FILTER (WHERE status IN ('new', 'running'))::int AS live
       FROM ${workflows} WHERE name = $1`,
    [name],
  );
  return r!;
}

/**
 * Waits until no workflow named `name` is new or running, polling a cheap EXISTS every
 * `intervalMs`. On timeout the rest are cancelled (through the SQL contract) so they do not
 * disturb the next scenario, and `timedOut` is true.
 */
export async function waitForWorkflows(ctx: StepdContext, name: string, intervalMs = 20): Promise<{ timedOut: boolean; counts: FinishedCounts }> {
  const { workflows } = tables(ctx.schema);
  let timedOut = false;
  try {
    await pollUntil(
      async () => {
        ctx.executor.assertAlive();
        const [r] = await query<{ live: boolean }>(
          ctx,
          `SELECT EXISTS (SELECT 1 FROM ${workflows} WHERE status IN ('new', 'running') AND name = $1) AS live`,
          [name],
        );
        return !r!.live;
      },
      { what: `workflows "${name}" to finish`, intervalMs, timeoutMs: ctx.timeoutMs },
    );
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    timedOut = true;
    await query(ctx, `UPDATE ${workflows} SET status = 'cancelled' WHERE name = $1 AND status IN ('new', 'running')`, [name]);
  }
  const counts = await countByStatus(ctx, name);
  if (counts.failed > 0) {
    const [f] = await query<{ error: unknown }>(ctx, `SELECT error FROM ${workflows} WHERE name = $1 AND status = 'failed' LIMIT 1`, [name]);
    throw new Error(`${counts.failed} "${name}" workflow(s) failed, e.g. ${JSON.stringify(f?.error)}`);
  }
  return { timedOut, counts };
}

/** A few workflows run first, so start-up and the first compilations stay out of the figures. */
export async function warmUp(ctx: StepdContext): Promise<void> {
  const flow = { start: 'a', steps: { a: { tool: 'core.noop', next: 'b' }, b: { tool: 'core.noop', done: true } } };
  await insertWorkflows(ctx, 'bench-warmup', flow, 50);
  const { timedOut } = await waitForWorkflows(ctx, 'bench-warmup', 10);
  if (timedOut) throw new Error(`the executor did not finish 50 warm-up workflows within ${ctx.timeoutMs} ms; its log:\n${ctx.executor.logTail.join('\n')}`);
}
