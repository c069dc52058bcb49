/**
 * Usage and cost budgets (sql/0030_usage.sql): what a workflow and its ancestors have spent.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { Queryable } from './common.js';

/** One workflow of a chain (the step's own first, then its parent, …): its cost so far and its flow's `budget.cost`. */
export interface WorkflowCost {
  id: string;
  cost: number;
  /** The flow's `budget.cost`; null when the flow sets none. */
  budget: number | null;
  createdBy: string | null;
}

/**
 * The cost so far of `workflowId` and of each workflow above it (sub-workflow parents), with
 * their flows' budgets: read-only, no lock (a budget is checked before a model call starts).
 */
export async function getWorkflowCostsUpTheChain(db: Queryable, workflowId: string): Promise<WorkflowCost[]> {
  const { rows } = await db.query<WorkflowCost>({
    name: 'stepd_get_workflow_costs_up_the_chain',
    text: `WITH RECURSIVE chain AS (
             SELECT id, parent_id, usage, flow -> 'budget' -> 'cost' AS budget, created_by, 0 AS depth FROM workflows WHERE id = $1
             UNION ALL
             SELECT w.id, w.parent_id, w.usage, w.flow -> 'budget' -> 'cost', w.created_by, c.depth + 1
               FROM workflows w JOIN chain c ON w.id = c.parent_id WHERE c.depth < 100)
           SELECT id::text AS id,
                  CASE WHEN jsonb_typeof(usage -> 'cost') = 'number' THEN (usage ->> 'cost')::float8 ELSE 0 END AS cost,
                  CASE WHEN jsonb_typeof(budget) = 'number' THEN (budget #>> '{}')::float8 END AS budget,
                  created_by AS "createdBy"
             FROM chain ORDER BY depth`,
    values: [workflowId],
  });
  return rows;
}
