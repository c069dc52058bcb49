/**
 * Hands claimed worker steps to the workers in batches (workerTaskStep.ts): the steps of a claim
 * all ask in the same tick, and one statement hands them over with one NOTIFY per tool
 * (handStepsToWorkersIfRunning). Every transaction that NOTIFYs takes PostgreSQL's notification
 * queue lock at commit, through its WAL flush, so a statement per step made the hand-off the
 * worker path's bound (docs/performance.md, "Workers"). Steps that ask while a batch is being
 * written go in the next one. A batch that fails as a whole is tried again step by step, so one
 * bad row fails only its own step.
 */
import type { Queryable } from '../../db/queries/common.js';
import { handStepsToWorkersIfRunning } from '../../db/queries/workerTasks.js';

interface Waiting {
  id: string;
  timeoutMs: number;
  resolve: (handed: boolean) => void;
  reject: (err: unknown) => void;
}

export interface WorkerHandOffsDeps {
  db: Queryable;
  executorId: string;
  schema: string;
  /** Steps per statement (default 500). */
  maxBatch?: number;
}

export class WorkerHandOffs {
  readonly #deps: WorkerHandOffsDeps;
  #waiting: Waiting[] = [];
  #writing: Promise<void> | undefined;

  constructor(deps: WorkerHandOffsDeps) {
    this.#deps = deps;
  }

  /** Hands the step over (with the next batch); resolves whether it was handed (false: no longer running here). */
  hand(id: string, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ id, timeoutMs, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#writing) return;
    this.#writing = this.#writeAll().finally(() => {
      this.#writing = undefined;
      if (this.#waiting.length > 0) this.#schedule();
    });
  }

  async #writeAll(): Promise<void> {
    // Let the rest of the claim's steps ask first (they start in the same tick).
    await new Promise<void>((resolve) => setImmediate(resolve));
    const max = this.#deps.maxBatch ?? 500;
    while (this.#waiting.length > 0) {
      const batch = this.#waiting.splice(0, max);
      try {
        await this.#write(batch);
      } catch (err) {
        if (batch.length === 1) {
          batch[0]!.reject(err);
          continue;
        }
        for (const one of batch) await this.#write([one]).catch((e: unknown) => one.reject(e));
      }
    }
  }

  async #write(batch: Waiting[]): Promise<void> {
    const handed = await handStepsToWorkersIfRunning(this.#deps.db, { executorId: this.#deps.executorId, schema: this.#deps.schema, steps: batch });
    for (const w of batch) w.resolve(handed.has(w.id));
  }
}
