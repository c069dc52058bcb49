/**
 * A pending step with a tool waits for a worker (config `workers`, sql/0027): it is no gate. The
 * CLI, the MCP server and the dashboard refuse to approve or reject it with this explanation (the
 * database refuses the readying too: trigger workflow_steps_guard_tasks).
 */
import { OperationError } from './errors.js';

/** Refuses to approve or reject (`verb`) a pending step that waits for a worker. */
export function refuseWorkerStep(step: { id: string; name: string; tool: string | null }, verb: 'approved' | 'rejected'): void {
  if (step.tool === null) return;
  throw new OperationError(
    'refused',
    `step ${step.id} (${step.name}) is not a gate: it waits for a worker serving ${step.tool} and completes when a worker reports it (docs/workers.md); it cannot be ${verb}`,
    { details: { tool: step.tool } },
  );
}
