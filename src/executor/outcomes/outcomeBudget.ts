/**
 * The statement budget of one outcome inside a shared batch of outcomes (transactions.ts): a
 * workflow whose settling runs past it is recorded in a transaction of its own, so one heavy
 * workflow never holds the others' commit.
 */
import type { Queryable } from '../../db/queries.js';

/**
 * Statements one outcome may run (its advance: reads, fan-out bookkeeping) inside a shared
 * batch. Settling M nested forks runs about 3·M; past this, the outcome is recorded alone.
 */
export const HEAVY_OUTCOME_STATEMENTS = 200;

/** An outcome ran past the statement budget of a shared batch: the batch is redone without its workflow. */
export class HeavyOutcome extends Error {
  readonly code = 'heavy_outcome';
  readonly retryable = true;
  constructor(readonly workflowId: string) {
    super(`settling an outcome of workflow ${workflowId} runs more than ${HEAVY_OUTCOME_STATEMENTS} statements`);
  }
}

/** The transaction's client as Advance sees it: counts each outcome's statements against a budget. */
export class OutcomeBudget implements Queryable {
  private used = 0;
  private workflowId = '';
  constructor(
    private readonly client: Queryable,
    private readonly budget: number,
  ) {}

  start(workflowId: string): void {
    this.used = 0;
    this.workflowId = workflowId;
  }

  query<R = any>(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: R[]; rowCount: number | null }> {
    if (++this.used > this.budget) return Promise.reject(new HeavyOutcome(this.workflowId));
    return this.client.query<R>(config);
  }
}
