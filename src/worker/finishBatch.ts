/**
 * The worker's results on their way to the database, several in one call when several are ready
 * (finish_tasks, sql/0037): one commit, and one WAL flush, for all of them. No timer and no
 * added wait: a result is sent at once when no report is being written; the results that become
 * ready meanwhile go together in the next call. A call refused as a whole (a stale token or an
 * oversized result among them, or a database without finish_tasks) is sent again one by one
 * (finish_task), so each task learns its own answer; a connection that failed rejects the whole
 * call's tasks with that error, and each TaskRun decides whether to try again (the token fences a
 * second arrival). Each task's promise settles exactly once. Against a database without
 * finish_tasks (migrated before sql/0037) each result is sent on its own at once, as before.
 */
import { isTransient } from './transient.js';

export interface FinishItem {
  task: { stepId: string; token: string };
  result: unknown;
}

export interface FinishBatchDeps {
  /** Records one result (finish_task). */
  one: (item: FinishItem) => Promise<void>;
  /** Records several, all or nothing (finish_tasks). */
  many: (items: readonly FinishItem[]) => Promise<void>;
  /** Results per call (default 100; the contract allows 1,000). */
  maxBatch?: number;
}

interface Waiting extends FinishItem {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** SQLSTATE of a function that does not exist: a database migrated before sql/0037. */
const UNDEFINED_FUNCTION = '42883';

export class FinishBatch {
  readonly #deps: FinishBatchDeps;
  #waiting: Waiting[] = [];
  #writing = false;
  /** False once the database showed it has no finish_tasks: one by one from then on. */
  #batches = true;

  constructor(deps: FinishBatchDeps) {
    this.#deps = deps;
  }

  /** Resolves once the result is recorded; rejects with the database's answer (or the connection's failure). */
  finish(item: FinishItem): Promise<void> {
    // Without finish_tasks each report is its own call, sent at once, as before sql/0037.
    if (!this.#batches) return this.#deps.one(item);
    return new Promise((resolve, reject) => {
      this.#waiting.push({ ...item, resolve, reject });
      if (!this.#writing) void this.#writeAll();
    });
  }

  async #writeAll(): Promise<void> {
    this.#writing = true;
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting.splice(0, this.#deps.maxBatch ?? 100);
        await this.#write(batch);
      }
    } finally {
      this.#writing = false;
    }
  }

  async #write(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) return this.#writeOne(batch[0]!);
    try {
      await this.#deps.many(batch);
    } catch (err) {
      if (isTransient(err)) {
        for (const w of batch) w.reject(err);
        return;
      }
      if ((err as { code?: unknown }).code === UNDEFINED_FUNCTION) this.#batches = false;
      // Refused as a whole, nothing recorded: each one on its own gets its own answer.
      for (const w of batch) await this.#writeOne(w);
      return;
    }
    for (const w of batch) w.resolve();
  }

  async #writeOne(w: Waiting): Promise<void> {
    try {
      await this.#deps.one(w);
      w.resolve();
    } catch (err) {
      w.reject(err);
    }
  }
}
