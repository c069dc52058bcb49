/**
 * The writes of one executor transaction, shared by every workflow it advances: new step rows
 * are queued and inserted in one statement (before any read of the steps table, and at the
 * end), events are collected for one NOTIFY, and running steps it cancels are remembered so
 * their tools can be aborted after commit.
 *
 * When the executor has free slots, a step that is ready at once is created already claimed
 * (status running, owned by this executor): it starts without waiting for the next claim.
 */
import {
  uncountFirstSteps,
  completeWorkflowsIfNoLiveSteps,
  endWorkflowsCancellingLiveSteps,
  insertSteps,
  notifyEvents,
  type ClaimedStep,
  type NewStep,
  type Queryable,
  type StepNotify,
  type WorkflowEnd,
} from '../../db/queries.js';
import { EVENTS_CHANNEL, eventPayload, type StepdEvent } from '../../events.js';

/** Lets a transaction claim the steps it creates for this executor. */
export interface ClaimOnCreate {
  executorId: string;
  /**
   * Takes a tool slot for a step created already claimed (reserved until it is started or the
   * transaction ends); false when none may be taken. Slots are taken as steps are created, so a
   * transaction that creates nothing to claim holds none and never keeps the claims waiting.
   */
  takeSlot(): boolean;
  /** Gives back a slot taken for a step that will not be started (dropped, or rolled back). */
  giveSlot(): void;
  /** Reserves room under the configured limits; null when a limit is reached. */
  acquire(tool: string | null, user: string | null): (() => void) | null;
  /** Whether a tool answers at once (ToolRegistry.isInstant): its steps are claimed without a slot. */
  instant(tool: string): boolean;
}

export interface CreatedClaim {
  step: NewStep;
  id: string;
  user: string | null;
  release: () => void;
  /** Whether it took a tool slot (not for an instant tool). */
  slot: boolean;
}

export class TxWriter {
  readonly events: StepdEvent[] = [];
  readonly cancelledRunning: string[] = [];
  readonly claimed: CreatedClaim[] = [];
  /** Ready rows created for the claim loop: 0 ms for now, or the soonest delay of a later one. */
  readyNow = false;
  soonestDelayMs: number | undefined;
  private readonly queued: { step: NewStep; claim?: { user: string | null; release: () => void; slot: boolean } }[] = [];
  private readonly counts = new Map<string, number>();
  /** Workflows whose chain ended at the top level: completed at the end if nothing is live. */
  private readonly ends = new Map<string, { output: unknown; done: (completed: boolean) => void }>();
  /** Workflows this transaction ended (completed or failed): told after commit (TxDeps.onWorkflowsEnded). */
  readonly endedWorkflows: string[] = [];
  /** Workflows this transaction completed through `completeIfIdle`. */
  readonly completedIdle = new Set<string>();
  /** Workflows ended in this transaction (completed or failed), written in one statement by finish(). */
  private readonly workflowEnds: WorkflowEnd[] = [];
  /** Their outcomes recorded but never applied: cancelled with them. */
  private readonly endUnapplied: string[] = [];
  /** Workflows admitted in this transaction whose first step row is counted already (precountFirstStep). */
  private readonly precounted = new Set<string>();
  /** Run first by finish(): each workflow's deferred work (arrivals at its forks). */
  private readonly settlers: (() => Promise<void> | undefined)[] = [];

  private atText: string | undefined;

  constructor(
    private readonly db: Queryable,
    readonly schema: string,
    private readonly claimOnCreate?: ClaimOnCreate,
  ) {}

  /** The `at` of this transaction's events: the time of the first one (they commit together). */
  get at(): string {
    return (this.atText ??= new Date().toISOString());
  }

  /** Step rows of `workflowId` so far, including queued ones (for the step budget). */
  stepCount(workflowId: string): number {
    return this.counts.get(workflowId) ?? 0;
  }

  setStepCount(workflowId: string, count: number): void {
    this.counts.set(workflowId, count);
  }

  /**
   * A workflow admitted in this transaction, whose admission counted its first step row in
   * advance (`countWithFirst`): the first row inserted for it is not counted again, so the
   * workflow row is written once; if it gets no row, finish() takes the count back.
   */
  precountFirstStep(workflowId: string, countWithFirst: number): void {
    this.counts.set(workflowId, countWithFirst - 1);
    this.precounted.add(workflowId);
  }

  /** Rows per workflow of `steps` counted already: the first row of each precounted workflow. */
  private takePrecounted(steps: NewStep[]): Map<string, number> | undefined {
    let taken: Map<string, number> | undefined;
    for (const s of steps) {
      if (!this.precounted.delete(s.workflowId)) continue;
      (taken ??= new Map()).set(s.workflowId, 1);
    }
    return taken;
  }

  event(e: StepdEvent): void {
    this.events.push(e);
    if (e.type === 'workflow.completed' || e.type === 'workflow.failed') this.endedWorkflows.push(e.workflowId);
  }

  /** Queues a row; a step ready now may be claimed on creation (see ClaimOnCreate), unless keys or rates gate it (claimGated.ts). */
  queue(step: NewStep, opts: { user?: string | null; leaseMs?: number } = {}): void {
    this.counts.set(step.workflowId, this.stepCount(step.workflowId) + 1);
    const c = this.claimOnCreate;
    if (c && step.status === 'ready' && step.tool !== null && !step.capacity && !step.readyInMs && step.readyAt === undefined && opts.leaseMs !== undefined) {
      // An instant tool (core.echo, core.noop) takes no slot: it is claimed whatever the slots.
      const slot = !c.instant(step.tool);
      if (!slot || c.takeSlot()) {
        const user = opts.user ?? null;
        const acquired = c.acquire(step.tool, user);
        if (acquired) {
          const release = slot ? acquired : () => {};
          this.queued.push({ step: { ...step, status: 'running', executorId: c.executorId, leaseMs: opts.leaseMs }, claim: { user, release, slot } });
          return;
        }
        if (slot) c.giveSlot();
      }
    }
    this.queued.push({ step });
  }

  /** Drops the queued rows of a workflow that ended in this transaction. */
  dropQueued(workflowId: string): void {
    for (let i = this.queued.length - 1; i >= 0; i--) {
      const q = this.queued[i]!;
      if (q.step.workflowId !== workflowId) continue;
      if (q.claim) {
        q.claim.release();
        if (q.claim.slot) this.claimOnCreate?.giveSlot();
      }
      this.queued.splice(i, 1);
    }
  }

  /** Inserts one row now and returns its id (forks and failed rows need theirs at once). */
  async insertNow(step: NewStep): Promise<string> {
    await this.flush();
    this.counts.set(step.workflowId, this.stepCount(step.workflowId) + 1);
    const [id] = await insertSteps(this.db, [step], undefined, this.takePrecounted([step]));
    return id!;
  }

  async flush(notify?: StepNotify): Promise<void> {
    if (this.queued.length === 0) return;
    const batch = this.queued.splice(0, this.queued.length);
    const steps = batch.map((q) => q.step);
    const ids = await insertSteps(this.db, steps, notify, this.takePrecounted(steps));
    for (const { step } of batch) {
      if (step.status !== 'ready') continue;
      const delay = step.readyAt !== undefined ? step.readyAt.getTime() - Date.now() : (step.readyInMs ?? 0);
      if (delay <= 0) this.readyNow = true;
      else this.soonestDelayMs = Math.min(this.soonestDelayMs ?? Infinity, delay);
    }
    batch.forEach((q, i) => {
      if (!q.claim) return;
      const id = ids[i]!;
      this.claimed.push({ step: q.step, id, user: q.claim.user, release: q.claim.release, slot: q.claim.slot });
      // Announced by the insert statement itself when it carried the events.
      if (notify) return;
      this.events.push({
        type: 'step.started',
        schema: this.schema,
        workflowId: q.step.workflowId,
        stepId: id,
        step: q.step.name,
        attempt: q.step.attempt,
        ...(q.step.itemIndex !== null ? { itemIndex: q.step.itemIndex } : {}),
        at: this.at,
      });
    });
  }

  /**
   * A chain of `workflowId` ended outside any fan-out: complete the workflow with `output` at the
   * end of the transaction (one statement for all of them) if none of its steps is live then.
   * A later end of the same workflow in this transaction replaces the output.
   */
  completeIfIdle(workflowId: string, output: unknown, done: (completed: boolean) => void): void {
    this.ends.set(workflowId, { output, done });
  }

  /**
   * Ends a workflow (completed or failed) at the end of the transaction, with every other one it
   * ends, in one statement that also cancels their live steps and `unapplied` (outcomes recorded
   * but not acted on). Nothing reads the workflow's rows after it ended in this transaction.
   */
  endWorkflow(end: WorkflowEnd, unapplied: string[]): void {
    this.workflowEnds.push(end);
    this.endUnapplied.push(...unapplied);
  }

  /** Work to finish before the last statements (a workflow's pending fork arrivals). */
  beforeFinish(settle: () => Promise<void> | undefined): void {
    this.settlers.push(settle);
  }

  /** Forgets a pending end (the workflow ended otherwise in this transaction). */
  cancelEnd(workflowId: string): void {
    this.ends.delete(workflowId);
  }

  /** Flushes rows, completes idle workflows and NOTIFYs the events: the last statements before COMMIT. */
  async finish(emitEvents: boolean): Promise<void> {
    for (const settle of this.settlers) {
      const settling = settle();
      if (settling) await settling;
    }
    if (emitEvents && this.queued.length > 0 && this.ends.size === 0 && this.workflowEnds.length === 0) {
      // The common chain case: the rows and every event go out in one statement.
      const payloads = this.events.splice(0, this.events.length).map(eventPayload);
      await this.flush({ channel: EVENTS_CHANNEL, payloads, startedSchema: this.schema });
      await this.uncountUnused();
      return;
    }
    await this.flush();
    await this.uncountUnused();
    if (this.workflowEnds.length > 0) {
      const ends = this.workflowEnds.splice(0);
      // Nothing is decided after it (no chain end waits to complete if idle): it carries every event.
      const last = emitEvents && this.ends.size === 0;
      const notify = last ? { channel: EVENTS_CHANNEL, payloads: this.events.splice(0, this.events.length).map(eventPayload) } : undefined;
      this.cancelledRunning.push(...(await endWorkflowsCancellingLiveSteps(this.db, ends, this.endUnapplied.splice(0), notify)));
      if (last) return;
    }
    if (this.ends.size > 0) {
      const ends = [...this.ends];
      this.ends.clear();
      const completed = new Set(await completeWorkflowsIfNoLiveSteps(this.db, ends.map(([workflowId, e]) => ({ workflowId, output: e.output }))));
      for (const [id, e] of ends) {
        if (completed.has(id)) this.completedIdle.add(id);
        e.done(completed.has(id));
      }
    }
    if (emitEvents) await notifyEvents(this.db, EVENTS_CHANNEL, this.events.map(eventPayload));
  }

  /** Admitted workflows that got no row (refused, or ended at once): their first step was counted for nothing. */
  private async uncountUnused(): Promise<void> {
    if (this.precounted.size === 0) return;
    const ids = [...this.precounted];
    this.precounted.clear();
    await uncountFirstSteps(this.db, ids);
  }

  /** After a rollback: give back every limit reserved for steps claimed on creation. */
  releaseClaims(): void {
    for (const q of this.queued) {
      if (!q.claim) continue;
      q.claim.release();
      if (q.claim.slot) this.claimOnCreate?.giveSlot();
    }
    for (const c of this.claimed) {
      c.release();
      if (c.slot) this.claimOnCreate?.giveSlot();
    }
  }
}

/** The row of a step claimed as it was created, as the claim query would have returned it. */
export function claimedRow(c: CreatedClaim, executorId: string): ClaimedStep {
  const s = c.step;
  const now = new Date();
  return {
    id: c.id,
    workflow_id: s.workflowId,
    name: s.name,
    tool: s.tool,
    args: s.args ?? null,
    result: null,
    error: null,
    status: 'running',
    attempt: s.attempt,
    ready_at: null,
    started_at: null,
    completed_at: null,
    created_at: now,
    updated_at: now,
    lease_until: null,
    executor_id: executorId,
    fanout_id: s.fanoutId,
    item_index: s.itemIndex,
    expires_at: null,
    readied_by: null,
    readied_at: null,
    readied_role: null,
    fanout_open: false,
    first_attempt_id: s.firstAttemptId ?? null,
    progress: null,
    child_id: null,
    created_by: c.user,
  };
}
