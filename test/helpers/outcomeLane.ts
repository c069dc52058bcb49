/**
 * The executor's transactions and outcome lane without an Executor: TxDeps over a pool of their
 * own, and an OutcomeQueue that records through finishSteps, as executor.ts wires them.
 */
import { createPool } from '../../src/db/connect.js';
import { WorkflowCache } from '../../src/executor/core/workflowCache.js';
import { OutcomeQueue, type OutcomeQueueOptions } from '../../src/executor/outcomes/outcomeQueue.js';
import { finishSteps, type TxDeps } from '../../src/executor/outcomes/transactions.js';
import { resolveCaps } from '../../src/flow/caps.js';
import { silentLogger, type Logger } from '../../src/logger.js';
import { onCleanup } from './db.js';

/** An executor's TxDeps (as `executorId`) on `schema` at `url`, its pool closed after the test. */
export function txDepsOn(opts: { url: string; schema: string; executorId: string; log?: Logger }): TxDeps {
  const pool = createPool({ url: opts.url, schema: opts.schema, role: 'executor', max: 2 });
  onCleanup(() => pool.end());
  return {
    pool,
    cache: new WorkflowCache(undefined, resolveCaps(undefined)),
    executorId: opts.executorId,
    schema: opts.schema,
    log: opts.log ?? silentLogger(),
    random: () => 0,
    emitEvents: false,
    leaseGraceMs: 1_000,
  };
}

/** An outcome lane recording through `tx`; `opts` as OutcomeQueueOptions (nothing told of results by default). */
export function outcomeLaneOn(tx: TxDeps, opts: Partial<OutcomeQueueOptions> = {}): OutcomeQueue {
  return new OutcomeQueue({ record: (inputs) => finishSteps(tx, inputs), onResult: () => {}, log: tx.log, ...opts });
}
