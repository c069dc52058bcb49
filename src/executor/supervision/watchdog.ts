/**
 * One sweep of the watchdog. Leader-only duties (under the watchdog lease, a row of
 * executor_leases that clients cannot write, so one executor does them): the running steps of executors that stopped heartbeating fail with `lost`
 * (retryable) whatever their lease; steps whose lease ran out likewise, unless their executor is
 * alive (beating, its listener's session open: it answers for its own steps); gates past their
 * deadline apply `onTimeout`; workflows past their timeout fail with `deadline`; the
 * executor-id claims of ended sessions are forgotten; signal matches deferred past a held wait
 * row are completed once the row is free (sql/0042); what retention no longer keeps is deleted.
 *
 * Every rescue is fenced: a dead executor's step is finished only while it is still `running`
 * under that executor's id, so an executor that was merely slow and comes back cannot record
 * its late outcome, and finds out that its steps were taken (findStepsNoLongerRunning).
 */
import {
  expireWorkerTasksPastLease,
  handBackReportedWorkerSteps,
  findExpiredGates,
  findExpiredLeasesOfGoneExecutors,
  findOwnStepsPastLease,
  findOverdueWorkflows,
  findStepsOfDeadExecutors,
  forgetDeadExecutorsWithoutSteps,
  forgetExecutorIdClaimsOfEndedSessions,
  handBackSettlingSubWorkflowSteps,
  notifyStepsReady,
} from '../../db/queries.js';
import { getStep } from '../../flow/compiled.js';
import type { Logger } from '../../logger.js';
import type { Outcome } from '../transitions/advance.js';
import { signalTimeoutOutcome } from '../transitions/signalWaits.js';
import { isLockNotAvailable } from '../../errors.js';
import { failOverdueWorkflow, finishStep, type FinishInput, type TxDeps, type TxResult } from '../outcomes/transactions.js';
import { emptyTxResult } from '../core/writerTransaction.js';
import { readyDeferredSignalMatches } from './deferredSignals.js';
import { pruneAsLeader } from '../../retention/leaderRetention.js';
import type { RetentionPolicy } from '../../retention/retentionPolicy.js';

export interface WatchdogDeps {
  tx: TxDeps;
  log: Logger;
  isLeader: () => Promise<boolean>;
  /** Called with each transaction's result (abort cancelled tools, wake the loop). */
  onResult: (r: TxResult) => void;
  batch?: number;
  /** What the leader deletes at the end of its sweep (config `retention`; src/retention/). */
  retention?: RetentionPolicy | undefined;
}

export interface SweepReport {
  leader: boolean;
  /** Steps of executors that stopped heartbeating, rescued. */
  orphaned: number;
  lost: number;
  gatesExpired: number;
  overdue: number;
  /** Signal waits readied from matches a held row had deferred (sql/0042). */
  deferredSignals: number;
}

/**
 * Runs one rescue; if its workflow's row is held by another transaction past the lock wait (a
 * long settle elsewhere, or a client holding it with SELECT … FOR UPDATE), it is left for the
 * next sweep instead of ending this one: one held row never stops the other rescues.
 */
async function unlessHeld(deps: WatchdogDeps, what: { workflowId: string; stepId?: string }, fn: () => Promise<TxResult>): Promise<TxResult> {
  try {
    return await fn();
  } catch (err) {
    if (!isLockNotAvailable(err)) throw err;
    deps.log.warn(what, 'workflow row held by another transaction; trying again at the next sweep');
    return emptyTxResult();
  }
}

function finishUnlessHeld(deps: WatchdogDeps, tx: TxDeps, input: FinishInput): Promise<TxResult> {
  return unlessHeld(deps, { workflowId: input.workflowId, stepId: input.stepId }, () => finishStep(tx, input));
}

const LEASE_RAN_OUT: Outcome = {
  status: 'failed',
  error: { code: 'lost', message: 'the executor running this step stopped answering before its lease ran out', retryable: true },
};

/**
 * Every executor's own duty at each sweep (not the leader's): its running steps past their lease
 * fail with `lost` (retryable), as the leader fails those of executors that are gone — a tool
 * that outlived its timeout and the lease grace, a prefetched step that waited too long, a step
 * a claim took whose answer was lost — except the steps whose outcome it holds (`holdsOutcome`,
 * asked after the query): finished, waiting to be recorded (a row lock, the database away).
 * Those keep their lease however long they wait, so their tool never runs twice; if this
 * executor dies meanwhile, its beats stop and the leader rescues them as before. Returns how many
 * were rescued.
 */
export async function rescueOwnStepsPastLease(deps: WatchdogDeps, holdsOutcome: () => ReadonlySet<string>): Promise<number> {
  const rows = await findOwnStepsPastLease(deps.tx.pool, deps.tx.executorId, deps.batch ?? 100);
  if (rows.length === 0) return 0;
  const held = holdsOutcome();
  let rescued = 0;
  for (const row of rows) {
    if (held.has(row.id)) continue;
    const r = await finishUnlessHeld(deps, deps.tx, { stepId: row.id, workflowId: row.workflow_id, guard: 'running', outcome: LEASE_RAN_OUT });
    if (r.recorded.has(row.id)) {
      rescued++;
      deps.log.warn({ workflowId: row.workflow_id, stepId: row.id }, 'step lease expired; rescued');
    }
    deps.onResult(r);
  }
  return rescued;
}

export async function runWatchdogOnce(deps: WatchdogDeps): Promise<SweepReport> {
  const report: SweepReport = { leader: false, orphaned: 0, lost: 0, gatesExpired: 0, overdue: 0, deferredSignals: 0 };
  if (!(await deps.isLeader())) return report;
  report.leader = true;
  const batch = deps.batch ?? 100;
  const { pool } = deps.tx;

  // Steps recording a finished sub-workflow's outcome whose executor is gone go back to ready, not `lost`.
  const handedBack = await handBackSettlingSubWorkflowSteps(pool, { executorId: deps.tx.executorId, whose: 'stranded' });
  if (handedBack > 0) {
    await notifyStepsReady(pool, deps.tx.schema);
    deps.log.warn({ count: handedBack }, 'handed back sub-workflow steps whose executor stopped while settling them');
  }
  // Likewise a worker's report another executor was recording: back to ready, the report kept (sql/0027).
  const reported = await handBackReportedWorkerSteps(pool, deps.tx.executorId);
  if (reported > 0) {
    await notifyStepsReady(pool, deps.tx.schema);
    deps.log.warn({ count: reported }, 'handed back worker reports whose executor stopped while recording them');
  }
  for (const row of await findStepsOfDeadExecutors(pool, deps.tx.executorId, batch)) {
    const outcome: Outcome = {
      status: 'failed',
      error: {
        code: 'lost',
        message: `executor "${row.executor_id}" stopped heartbeating while this step was running`,
        retryable: true,
        details: { executorId: row.executor_id, silentMs: row.silent_ms },
      },
    };
    // Fenced on the dead executor's id: finished only if still running under it.
    const r = await finishUnlessHeld(deps, { ...deps.tx, executorId: row.executor_id }, { stepId: row.id, workflowId: row.workflow_id, guard: 'running', outcome });
    if (r.recorded.has(row.id)) {
      report.orphaned++;
      deps.log.warn({ workflowId: row.workflow_id, stepId: row.id, executorId: row.executor_id, silentMs: row.silent_ms }, 'executor stopped heartbeating; rescued its step');
    }
    deps.onResult(r);
  }
  const forgotten = await forgetDeadExecutorsWithoutSteps(pool, deps.tx.executorId);
  if (forgotten.length > 0) deps.log.info({ executorIds: forgotten }, 'forgot executors that stopped heartbeating');
  await forgetExecutorIdClaimsOfEndedSessions(pool);

  // A live executor answers for its own steps (recovery.ts, rescueOwnStepsPastLease): it keeps
  // those whose outcome it holds, however long a lock makes it wait, and rescues the others.
  for (const row of await findExpiredLeasesOfGoneExecutors(pool, batch)) {
    const r = await finishUnlessHeld(deps, deps.tx, { stepId: row.id, workflowId: row.workflow_id, guard: 'lease-expired', outcome: LEASE_RAN_OUT });
    if (r.recorded.has(row.id)) {
      report.lost++;
      deps.log.warn({ workflowId: row.workflow_id, stepId: row.id }, 'step lease expired; rescued');
    }
    deps.onResult(r);
  }

  // Worker tasks whose lease ran out go back to the executors as lost attempts (sql/0027).
  const tasksLost = await expireWorkerTasksPastLease(pool, batch);
  if (tasksLost > 0) deps.log.warn({ count: tasksLost }, 'worker task leases ran out; the steps are retried');

  // Before the timeouts: a signal sent in time while its wait's row was held is delivered, not timed out.
  report.deferredSignals = await readyDeferredSignalMatches({ pool: deps.tx.pool, schema: deps.tx.schema, log: deps.log }, batch);
  for (const row of await findExpiredGates(pool, batch)) {
    const wf = (await deps.tx.cache.load(pool, [row.workflow_id])).get(row.workflow_id);
    if (!wf) continue;
    const flowStep = getStep(wf.flow, row.name);
    const onTimeout = flowStep.approval?.onTimeout ?? 'fail';
    const outcome: Outcome =
      flowStep.kind === 'signal'
        ? signalTimeoutOutcome(flowStep)
        : onTimeout === 'approve'
        ? { status: 'done', result: { approved: true, timedOut: true } }
        : onTimeout === 'reject'
          ? { status: 'failed', error: { code: 'rejected', message: 'rejected: the approval timed out', retryable: false, details: { timedOut: true } } }
          : { status: 'failed', error: { code: 'gate_timeout', message: 'nobody approved the gate before its timeout', retryable: false } };
    const r = await finishUnlessHeld(deps, deps.tx, { stepId: row.id, workflowId: row.workflow_id, guard: 'gate-expired', outcome });
    if (r.recorded.has(row.id)) {
      report.gatesExpired++;
      if (flowStep.kind === 'signal') deps.log.info({ workflowId: row.workflow_id, stepId: row.id }, 'signal wait timed out');
      else deps.log.info({ workflowId: row.workflow_id, stepId: row.id, onTimeout }, 'gate timed out');
    }
    deps.onResult(r);
  }

  for (const row of await findOverdueWorkflows(pool, batch)) {
    const r = await unlessHeld(deps, { workflowId: row.id }, () => failOverdueWorkflow(deps.tx, row.id));
    if (r.recorded.size > 0) report.overdue++;
    deps.onResult(r);
  }
  // Retention last: rescues come first, and a slow delete never holds them up.
  await pruneAsLeader({ pool, log: deps.log, policy: deps.retention });
  return report;
}
