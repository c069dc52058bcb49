/**
 * A claimed gate whose readying may not stand (approval.approvers, approval.schema: the pure
 * decision is src/flow/approvalCheck.ts) goes back to waiting instead of completing: status
 * pending, the refusal in its `error`, and a `step.waiting` event that carries it. The workflow
 * goes on waiting for a readying that may stand (or the gate's timeout).
 */
import { withTransaction } from '../../db/connect.js';
import { isRoleTrusted, notifyEvents, returnGateToWaitingIfRunning, type ClaimedStep } from '../../db/queries.js';
import { EVENTS_CHANNEL, eventPayload } from '../../events.js';
import { gateChecksReadying, refuseReadying } from '../../flow/approvalCheck.js';
import { storableIssues, storableText } from '../../flow/caps.js';
import type { CompiledStep } from '../../flow/compiled.js';
import type { TxDeps } from '../outcomes/transactions.js';

export type GateDeps = Pick<TxDeps, 'pool' | 'executorId' | 'schema' | 'emitEvents' | 'log' | 'clients'>;

/**
 * Checks the readying of a claimed gate; when it is refused, returns the gate to waiting and
 * returns true (the step has no outcome). Also true when the check could not be made (the
 * database failed): an unchecked approval never completes a gate; the step's lease runs out and
 * the watchdog takes it from there.
 */
export async function refuseReadyingIfNotAllowed(deps: GateDeps, row: ClaimedStep, step: CompiledStep): Promise<boolean> {
  if (step.kind !== 'gate' || !gateChecksReadying(step)) return false;
  try {
    const approvers = step.approval?.approvers;
    const roleTrusted = approvers !== undefined && row.readied_role !== null ? await isRoleTrusted(deps.pool, row.readied_role) : true;
    const refusal = refuseReadying(step, { result: row.result, readiedBy: row.readied_by, readiedRole: row.readied_role, roleTrusted }, deps.clients);
    if (!refusal) return false;
    const error = { ...refusal, message: storableText(refusal.message), ...(Array.isArray(refusal.issues) ? { issues: storableIssues(refusal.issues) } : {}) };
    await withTransaction(deps.pool, async (client) => {
      const gate = await returnGateToWaitingIfRunning(client, { id: row.id, executorId: deps.executorId, refusal: error });
      if (!gate || !deps.emitEvents) return;
      const message = (gate.args as { message?: unknown } | null)?.message;
      await notifyEvents(client, EVENTS_CHANNEL, [
        eventPayload({
          type: 'step.waiting',
          schema: deps.schema,
          workflowId: gate.workflow_id,
          stepId: gate.id,
          step: gate.name,
          attempt: gate.attempt,
          ...(gate.item_index !== null ? { itemIndex: gate.item_index } : {}),
          ...(typeof message === 'string' ? { message } : {}),
          error: { code: error.code, message: error.message },
          at: new Date().toISOString(),
        }),
      ]);
    });
    deps.log.warn({ workflowId: row.workflow_id, stepId: row.id, step: row.name, readiedBy: row.readied_by, readiedRole: row.readied_role, error }, 'gate readying refused; the gate is waiting again');
  } catch (err) {
    deps.log.error({ err, workflowId: row.workflow_id, stepId: row.id }, 'could not check the readying of a gate; leaving it to the watchdog');
  }
  return true;
}
