/**
 * A workflow page's data with the workflow's frozen flow beside it (for the flow graph): the
 * operations layer's details leave the flow out (the MCP tools return them as they are), so the
 * dashboard reads it here. The flow never changes once the workflow exists.
 */
import type { Kysely } from 'kysely';
import type { WorkflowDetails } from '../../api/operations.js';
import { getWorkflow } from '../../db/reads.js';
import type { Database } from '../../db/tables.js';

export type WorkflowPageData = WorkflowDetails & { flow?: unknown };

export async function withFlow(db: Kysely<Database>, details: WorkflowDetails): Promise<WorkflowPageData> {
  const row = await getWorkflow(db, details.workflow.id);
  return row ? { ...details, flow: row.flow } : details;
}
