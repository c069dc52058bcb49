/**
 * Finished steps wait here for their outcome to be recorded; one drain at a time takes every
 * outcome waiting and records them in one transaction, so under load many steps share a commit.
 * A batch that cannot be recorded is retried with backoff; after that the step's lease runs out
 * and the watchdog retries it.
 */
import type { Logger } from '../logger.js';
import type { FinishInput, TxResult } from './transactions.js';

export interface OutcomeQueueOptions {
  record: (inputs: FinishInput[]) => Promise<TxResult>;
  onResult: (result: TxResult) => void;
  log: Logger;
  maxBatch?: number;
  maxAttempts?: number;
}

export class OutcomeQueue {
  private readonly pending: { input: FinishInput; resolve: () => void }[] = [];
  private draining: Promise<void> | undefined;

  constructor(private readonly opts: OutcomeQueueOptions) {}

  get size(): number {
    return this.pending.length;
  }

  /** Resolves once the outcome is recorded (or given up on). Never rejects. */
  push(input: FinishInput): Promise<void> {
    return new Promise((resolve) => {
      this.pending.push({ input, resolve });
      this.draining ??= this.drain().finally(() => (this.draining = undefined));
    });
  }

  /** Waits until everything pushed so far is recorded. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    const maxBatch = this.opts.maxBatch ?? 500;
    const maxAttempts = this.opts.maxAttempts ?? 5;
    // Let outcomes finishing in the same tick join the first batch.
    await new Promise((r) => setImmediate(r));
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, maxBatch);
      for (let attempt = 1; ; attempt++) {
        try {
          this.opts.onResult(await this.opts.record(batch.map((b) => b.input)));
          break;
        } catch (err) {
          const ids = batch.map((b) => b.input.stepId);
          if (attempt >= maxAttempts) {
            this.opts.log.error({ err, stepIds: ids }, 'could not record step outcomes; the watchdog will retry the steps');
            break;
          }
          this.opts.log.warn({ err, stepIds: ids, attempt }, 'recording step outcomes failed; retrying');
          await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
        }
      }
      for (const b of batch) b.resolve();
    }
  }
}
