/**
 * Forking a workflow (docs/operations.md, "Fork"): the contract's fork_workflow (sql/0031), which
 * decides who may fork what. Not re-exported by src/db/queries.ts.
 */
import { jsonParam, type Queryable } from './common.js';

export interface ForkRequest {
  sourceId: string;
  /** The step to run from (null: the flow's start). */
  fromStep: string | null;
  /** The fork's input (null: the source's). */
  input: Record<string, unknown> | null;
  /** Results of earlier steps to use instead of the recorded ones. */
  results: Record<string, unknown> | null;
}

/** Calls fork_workflow as the session's role; returns the new workflow's id. */
export async function forkWorkflowAsRole(db: Queryable, r: ForkRequest): Promise<string> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_fork_workflow',
    text: `SELECT fork_workflow($1::bigint, $2::text, $3::jsonb, $4::jsonb)::text AS id`,
    values: [r.sourceId, r.fromStep, r.input === null ? null : jsonParam(r.input), r.results === null ? null : jsonParam(r.results)],
  });
  return rows[0]!.id;
}
