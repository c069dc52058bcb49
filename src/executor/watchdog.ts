/**
 * One sweep of the watchdog. Leader-only duties (under an advisory lock, so one executor
 * does them): steps whose lease ran out fail with `lost` (retryable); gates past their
 * deadline apply `onTimeout`; workflows past their timeout fail with `deadline`.
 */
import { findExpiredGates, findExpiredLeases, findOverdueWorkflows } from '../db/queries.js';
import { getStep } from '../flow/compiled.js';
import type { Logger } from '../logger.js';
import type { Outcome } from './advance.js';
import { failOverdueWorkflow, finishStep, type TxDeps, type TxResult } from './transactions.js';

export interface WatchdogDeps {
  tx: TxDeps;
  log: Logger;
  isLeader: () => Promise<boolean>;
  /** Called with each transaction's result (abort cancelled tools, wake the loop). */
  onResult: (r: TxResult) => void;
  batch?: number;
}

export interface SweepReport {
  leader: boolean;
  lost: number;
  gatesExpired: number;
  overdue: number;
}

export async function runWatchdogOnce(deps: WatchdogDeps): Promise<SweepReport> {
  const report: SweepReport = { leader: false, lost: 0, gatesExpired: 0, overdue: 0 };
  if (!(await deps.isLeader())) return report;
  report.leader = true;
  const batch = deps.batch ?? 100;
  const { pool } = deps.tx;

  for (const row of await findExpiredLeases(pool, batch)) {
    const outcome: Outcome = {
      status: 'failed',
      error: { code: 'lost', message: 'the executor running this step stopped answering before its lease ran out', retryable: true },
    };
    const r = await finishStep(deps.tx, { stepId: row.id, workflowId: row.workflow_id, guard: 'lease-expired', outcome });
    if (r.recorded.has(row.id)) {
      report.lost++;
      deps.log.warn({ workflowId: row.workflow_id, stepId: row.id }, 'step lease expired; rescued');
    }
    deps.onResult(r);
  }

  for (const row of await findExpiredGates(pool, batch)) {
    const wf = (await deps.tx.cache.load(pool, [row.workflow_id])).get(row.workflow_id);
    if (!wf) continue;
    const onTimeout = getStep(wf.flow, row.name).approval?.onTimeout ?? 'fail';
    const outcome: Outcome =
      onTimeout === 'approve'
        ? { status: 'done', result: { approved: true, timedOut: true } }
        : onTimeout === 'reject'
          ? { status: 'failed', error: { code: 'rejected', message: 'rejected: the approval timed out', retryable: false, details: { timedOut: true } } }
          : { status: 'failed', error: { code: 'gate_timeout', message: 'nobody approved the gate before its timeout', retryable: false } };
    const r = await finishStep(deps.tx, { stepId: row.id, workflowId: row.workflow_id, guard: 'gate-expired', outcome });
    if (r.recorded.has(row.id)) {
      report.gatesExpired++;
      deps.log.info({ workflowId: row.workflow_id, stepId: row.id, onTimeout }, 'gate timed out');
    }
    deps.onResult(r);
  }

  for (const row of await findOverdueWorkflows(pool, batch)) {
    const r = await failOverdueWorkflow(deps.tx, row.id);
    if (r.recorded.size > 0) report.overdue++;
    deps.onResult(r);
  }
  return report;
}
