/**
 * The steps this executor is running, each a task with its AbortController. A task that holds a
 * tool slot gives it back when it ends; a task handed back by a forced stop is `released`, and its
 * outcome must not be written.
 */
import type { Logger } from '../../logger.js';
import type { Slots } from './slots.js';

export interface RunningTask {
  workflowId: string;
  controller: AbortController;
  /** Set when a forced shutdown handed the step back: its outcome must not be written. */
  released: boolean;
  /** A prefetched step waiting for a tool slot: its tool has not started. */
  waiting: boolean;
  done: Promise<void>;
}

export class RunningTasks {
  private readonly tasks = new Map<string, RunningTask>();

  constructor(private readonly deps: { log: Logger; slots: Slots; onEnded: () => void }) {}

  get size(): number {
    return this.tasks.size;
  }

  has(stepId: string): boolean {
    return this.tasks.has(stepId);
  }

  /** Whether a step of this workflow runs (or waits for a slot) here. */
  hasWorkflow(workflowId: string): boolean {
    for (const task of this.tasks.values()) if (task.workflowId === workflowId) return true;
    return false;
  }

  ids(): string[] {
    return [...this.tasks.keys()];
  }

  /**
   * Runs `run` as the task of `stepId`. Tool calls hold a slot (waiting for one when the step was
   * prefetched); readied gates, due timers and instant tools complete at once and don't.
   */
  start(stepId: string, workflowId: string, holdsSlot: boolean, run: (task: RunningTask) => Promise<void>, ahead = false): void {
    if (this.tasks.has(stepId)) {
      // Never two tasks (and two outcomes) for one step row.
      this.deps.log.warn({ stepId, workflowId }, 'step is already running here; not starting it twice');
      return;
    }
    const task: RunningTask = { workflowId, controller: new AbortController(), released: false, waiting: false, done: Promise.resolve() };
    this.tasks.set(stepId, task);
    const slots = this.deps.slots;
    const wait = holdsSlot ? slots.holdOrWait(ahead) : undefined;
    let holding = holdsSlot && !wait;
    const started = wait ? this.afterSlot(task, wait, () => ((holding = true), run(task))) : run(task);
    task.done = started.finally(() => {
      if (holding) slots.release();
      this.tasks.delete(stepId);
      this.deps.onEnded();
    });
  }

  /**
   * A prefetched step waits for its slot; aborted meanwhile (cancelled, handed back), it ends at
   * once without running, and the slot it is handed later goes on to the next one waiting.
   */
  private afterSlot(task: RunningTask, wait: Promise<void>, run: () => Promise<void>): Promise<void> {
    task.waiting = true;
    const signal = task.controller.signal;
    return new Promise<void>((resolve) => {
      const onAbort = () => resolve();
      signal.addEventListener('abort', onAbort, { once: true });
      void wait.then(() => {
        signal.removeEventListener('abort', onAbort);
        task.waiting = false;
        if (signal.aborted) {
          this.deps.slots.release();
          return resolve();
        }
        run().then(resolve, resolve);
      });
    });
  }

  /** Hands back the prefetched steps still waiting for a slot (stopping): returns their step ids. */
  releaseWaiting(reason: Error): string[] {
    const ids = [...this.tasks].filter(([, t]) => t.waiting).map(([id]) => id);
    for (const id of ids) this.tasks.get(id)!.released = true;
    for (const id of ids) this.abort(id, reason);
    return ids;
  }

  abort(stepId: string, reason: Error): void {
    const task = this.tasks.get(stepId);
    if (task && !task.controller.signal.aborted) {
      this.deps.log.info({ stepId, workflowId: task.workflowId, reason: reason.message }, 'aborting running step');
      task.controller.abort(reason);
    }
  }

  abortWorkflow(workflowId: string, reason: Error): void {
    for (const [stepId, task] of this.tasks) if (task.workflowId === workflowId) this.abort(stepId, reason);
  }

  /** Marks every task handed back (its outcome is dropped) and aborts it. Returns their step ids. */
  releaseAll(reason: Error): string[] {
    const ids = this.ids();
    for (const task of this.tasks.values()) task.released = true;
    for (const id of ids) this.abort(id, reason);
    return ids;
  }

  /** Settles when every task running now has ended. */
  async allDone(): Promise<void> {
    await Promise.allSettled([...this.tasks.values()].map((t) => t.done));
  }

  /** Resolves true when every task ended within `ms`. */
  async doneWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([this.allDone().then(() => true), new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)))]);
    clearTimeout(timer);
    return ended;
  }
}
