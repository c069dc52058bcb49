/**
 * One workflow transition, inside one transaction that holds the workflow row lock: record a
 * step's outcome (fenced), ask the pure resolver what comes next, and write it — new steps,
 * fan-outs, joins, retries, or the end of the workflow. Events are NOTIFYed in the same
 * transaction, so they are delivered only if it commits.
 */
import { StepError, TemplateError, type ErrorData } from '../../errors.js';
import { getStep, type CompiledStep } from '../../flow/compiled.js';
import { resolveTemplates } from '../../flow/templates.js';
import { renderGateArgs } from '../../flow/gateArgs.js';
import { valueCapError } from '../../flow/caps.js';
import { failureNeedsLostCount, resolveFailure, resolveSuccess, type Decision } from '../../flow/transitions.js';
import { countLostAttemptsBefore, failDoneStepForTransition, getLatestDoneRowInChain, getPrecedingRowInChain, getReceivedSignal, setFanoutOpen, type NewStep, type Queryable } from '../../db/queries.js';
import type { StepdEvent } from '../../events.js';
import type { TxWriter } from '../core/txWriter.js';
import type { AdvanceDeps, Outcome } from '../core/txTypes.js';
import type { WorkflowInfo } from '../core/workflowCache.js';
import { ScopeBuilder } from './scope.js';
import { ForkSettlement, type ForkHost, type Position } from './forkSettlement.js';
import { startSubWorkflowStep } from './subWorkflows.js';
import { startSignalWait } from './signalWaits.js';
import { resolveSignalWait } from '../../flow/signalWait.js';
import { ChildStartError } from '../../flow/subWorkflow.js';
import { resolveWaitMs } from '../../flow/waitDuration.js';
import { stepCapacityFields } from './capacityFields.js';

export type { AdvanceDeps, Outcome } from '../core/txTypes.js';
export type { Position } from './forkSettlement.js';

/** The row a decision continues from. */
export interface Origin extends Position {
  id: string;
  name: string;
  attempt: number;
  args: unknown;
  /** On a retry row: its step's first attempt. */
  firstAttemptId?: string | null;
}

/**
 * State of one workflow within one transaction. Writes go through the transaction's TxWriter,
 * which several Advances (one per workflow) may share. Arrivals at forks are settled after the
 * outcomes of the batch are applied (settleArrivals; the writer does it before it finishes).
 */
export class Advance implements ForkHost {
  private finished = false;
  readonly scopes: ScopeBuilder;
  private readonly forks: ForkSettlement;
  /** Outcomes recorded in this transaction and not applied yet (see ForkHost.unapplied). */
  private readonly pendingOutcomes = new Set<string>();
  /** Of those, the ones a failing fork or the workflow's end cancelled: never applied. */
  private readonly cancelledOutcomes = new Set<string>();

  constructor(
    readonly db: Queryable,
    private readonly deps: AdvanceDeps,
    readonly wf: WorkflowInfo,
    readonly writer: TxWriter,
  ) {
    this.scopes = new ScopeBuilder(db, wf, () => this.flush());
    this.forks = new ForkSettlement(this);
    writer.beforeFinish(() => this.settleArrivals());
  }

  /** True once the workflow reached a terminal state in this transaction. */
  get ended(): boolean {
    return this.finished;
  }

  event(type: StepdEvent['type'], extra: Partial<StepdEvent> = {}): void {
    this.writer.event({ type, schema: this.deps.schema, workflowId: this.wf.id, at: this.writer.at, ...extra });
  }

  /** Outcomes recorded by the batch before any is applied: until applied, they count as live. */
  recorded(stepIds: Iterable<string>): void {
    for (const id of stepIds) this.pendingOutcomes.add(id);
  }

  unapplied(): string[] {
    return [...this.pendingOutcomes];
  }

  cancelUnapplied(ids: string[]): void {
    for (const id of ids) {
      this.pendingOutcomes.delete(id);
      this.cancelledOutcomes.add(id);
    }
  }

  /**
   * Settles the arrivals at forks that the outcomes applied so far left (see ForkSettlement);
   * undefined at once when none waits (the usual case: no promise per workflow and transaction).
   */
  settleArrivals(): Promise<void> | undefined {
    return this.forks.waiting ? this.forks.settleArrivals() : undefined;
  }

  /**
   * Applies a step's outcome, already recorded on `origin`'s row — unless the workflow ended or
   * a failing fork cancelled the step since (it then changes nothing, as a late outcome).
   */
  async afterOutcome(origin: Origin, outcome: Outcome): Promise<void> {
    this.pendingOutcomes.delete(origin.id);
    if (this.finished || this.cancelledOutcomes.has(origin.id)) return;
    const flow = this.wf.flow;
    if (!flow.steps.has(origin.name)) {
      // A row the flow does not know (written outside it): nothing can follow it; the workflow fails.
      const error = outcome.status === 'failed' ? outcome.error : { code: 'unknown_step', message: `step "${origin.name.slice(0, 200)}" is not in the workflow's flow` };
      return this.failWorkflow({ ...error, step: origin.name.slice(0, 200) });
    }
    if (outcome.status === 'done') {
      this.event('step.done', { stepId: origin.id, step: origin.name, attempt: origin.attempt });
      const error = await this.handledError(origin);
      const scope = await this.scopes.forStep(getStep(flow, origin.name), origin, { result: outcome.result, error });
      await this.apply(resolveSuccess(flow, origin.name, scope), origin);
    } else {
      this.event('step.failed', { stepId: origin.id, step: origin.name, attempt: origin.attempt, error: outcome.error });
      const lostBefore = failureNeedsLostCount(flow, origin.name, origin.attempt, outcome.error) ? await this.lostAttemptsBefore(origin) : 0;
      await this.apply(resolveFailure(flow, origin.name, origin.attempt, outcome.error, this.deps.random(), lostBefore), origin);
    }
  }

  /** The step's earlier attempts that were lost (retry.maxLost counts them apart from maxAttempts). */
  private async lostAttemptsBefore(origin: Origin): Promise<number> {
    await this.flush();
    return countLostAttemptsBefore(this.db, { workflowId: this.wf.id, firstAttemptId: origin.firstAttemptId ?? origin.id, beforeId: origin.id });
  }

  /**
   * For a step that some step's `onError` names: the error that routed there (its predecessor in
   * the chain, when that is a failed attempt of such a step), so `{{error}}` resolves in its
   * conditions and output as it did in its args.
   */
  private async handledError(origin: Origin): Promise<ErrorData | undefined> {
    let handles = false;
    for (const s of this.wf.flow.steps.values()) if (s.onError === origin.name) handles = true;
    if (!handles) return undefined;
    await this.flush();
    const prev = await getPrecedingRowInChain(this.db, {
      workflowId: this.wf.id,
      fanoutId: origin.fanoutId,
      itemIndex: origin.itemIndex,
      beforeId: origin.id,
    });
    if (!prev || prev.status !== 'failed' || !prev.error) return undefined;
    if (this.wf.flow.steps.get(prev.name)?.onError !== origin.name) return undefined;
    // A failed fork row already names the branch step that failed.
    return { step: prev.name, attempt: prev.attempt, ...prev.error };
  }

  async apply(decision: Decision, origin: Origin): Promise<void> {
    if (this.finished) return;
    const pos: Position = { fanoutId: origin.fanoutId, itemIndex: origin.itemIndex };
    switch (decision.kind) {
      case 'goto':
        return this.createStep(decision.to, pos, decision.error ? { error: decision.error } : {});
      case 'retry':
        this.event('step.retrying', {
          stepId: origin.id,
          step: origin.name,
          attempt: origin.attempt + 1,
          retryInMs: decision.delayMs,
          ...(origin.itemIndex !== null ? { itemIndex: origin.itemIndex } : {}),
        });
        // A gate lost while its readying was taken waits for a decision again: a ready row
        // without a result would read as an approval.
        if (getStep(this.wf.flow, origin.name).kind === 'gate') return this.gateAgain(origin, pos);
        // A signal wait lost after its claim keeps the signal it consumed (never a retry without it).
        if (getStep(this.wf.flow, origin.name).kind === 'signal') {
          await this.flush();
          const result = await getReceivedSignal(this.db, origin.firstAttemptId ?? origin.id);
          return this.queue({ workflowId: this.wf.id, name: origin.name, tool: null, args: origin.args, status: 'ready', attempt: origin.attempt + 1, readyInMs: 0, result, firstAttemptId: origin.firstAttemptId ?? origin.id, ...pos });
        }
        return this.queue({
          workflowId: this.wf.id,
          name: origin.name,
          tool: getStep(this.wf.flow, origin.name).tool,
          args: origin.args,
          status: 'ready',
          attempt: origin.attempt + 1,
          readyInMs: decision.delayMs,
          firstAttemptId: origin.firstAttemptId ?? origin.id,
          ...pos,
        });
      case 'parallel': {
        if (decision.branches.length === 0) return this.forks.settleEmpty(await this.forks.forkRow(origin.id));
        await this.markOpen(origin);
        // Each branch keeps its place in the listed order (item_index), whichever started.
        const listed = (getStep(this.wf.flow, origin.name).transition as { branches: string[] }).branches;
        for (const branch of decision.branches.slice(0, decision.concurrency ?? decision.branches.length)) {
          await this.createStep(branch, { fanoutId: origin.id, itemIndex: listed.indexOf(branch) }, {});
        }
        return;
      }
      case 'forEach': {
        if (decision.items.length === 0) return this.forks.settleEmpty(await this.forks.forkRow(origin.id));
        await this.markOpen(origin);
        const n = Math.min(decision.concurrency, decision.items.length);
        for (let i = 0; i < n; i++) {
          await this.createStep(decision.step, { fanoutId: origin.id, itemIndex: i }, { item: decision.items[i], index: i });
        }
        return;
      }
      case 'arrive':
        return this.forks.arrive(pos, decision.output);
      case 'complete':
        return this.completeWorkflow(decision.output);
      case 'failWorkflow':
        return this.failWorkflow(decision.error);
      case 'failBranch':
        // Under allSettled the join sees the branch failed; under failFast the row stays done, so a
        // redrive runs the transition again on the kept result (redrivePlan.ts).
        if (decision.transition && pos.fanoutId !== null && (await this.forks.enclosingMode(pos)) === 'allSettled') {
          await this.flush();
          await failDoneStepForTransition(this.db, origin.id, decision.error);
        }
        return this.forks.failBranch(pos, decision.error);
    }
  }

  /** A chain ended outside any fan-out: the workflow completes at the end of the transaction if nothing is live then. */
  async endTopChain(output: unknown): Promise<void> {
    const tooLarge = this.wf.flow.caps && valueCapError('the workflow output', output, 'outputBytes', this.wf.flow.caps);
    if (tooLarge) return this.failWorkflow(tooLarge);
    this.writer.completeIfIdle(this.wf.id, output, (completed) => completed && this.ended_('completed'));
  }

  /** The next attempt of a gate: pending again, with its rendered message and a fresh timeout. */
  private async gateAgain(origin: Origin, pos: Position): Promise<void> {
    const step = getStep(this.wf.flow, origin.name);
    const timeout = step.approval?.timeoutMs;
    const attempt = origin.attempt + 1;
    const id = await this.writer.insertNow({
      workflowId: this.wf.id,
      name: origin.name,
      tool: null,
      args: origin.args,
      status: 'pending',
      attempt,
      firstAttemptId: origin.firstAttemptId ?? origin.id,
      ...pos,
      ...(timeout !== undefined ? { expiresInMs: timeout } : {}),
    });
    const message = (origin.args as { message?: unknown } | null)?.message;
    this.event('step.waiting', { stepId: id, step: origin.name, attempt, ...(pos.itemIndex !== null ? { itemIndex: pos.itemIndex } : {}), ...(typeof message === 'string' ? { message } : {}) });
  }

  /** Creates the row for step `name` at `pos`. Forks fan out at once; bad templates fail it. */
  async createStep(name: string, pos: Position, extra: { error?: ErrorData; results?: unknown; completed?: number; item?: unknown; index?: number }): Promise<void> {
    if (this.finished) return;
    const step = getStep(this.wf.flow, name);
    if (this.writer.stepCount(this.wf.id) + 1 > this.wf.flow.maxSteps) {
      return this.failWorkflow({
        code: 'step_limit',
        message: `workflow reached its step budget of ${this.wf.flow.maxSteps} step rows`,
        step: name,
        details: { maxSteps: this.wf.flow.maxSteps },
      });
    }
    const base = { workflowId: this.wf.id, name, tool: step.tool, attempt: 1, fanoutId: pos.fanoutId, itemIndex: pos.itemIndex };
    try {
      switch (step.kind) {
        case 'tool': {
          const scope = await this.scopes.forStep(step, pos, extra);
          const capacity = stepCapacityFields(this.wf.flow, step, scope, this.wf.createdBy, this.deps.rates, this.wf.role);
          return this.queue({ ...base, args: resolveTemplates(step.args, scope), status: 'ready', readyInMs: 0, ...capacity });
        }
        case 'gate': {
          // Inserted now: the step.waiting event carries the gate's id (and its rendered message).
          const args = step.approval?.message !== undefined || step.approval?.approvers !== undefined ? renderGateArgs(step, await this.scopes.forStep(step, pos, extra)) : null;
          const timeout = step.approval?.timeoutMs;
          const id = await this.writer.insertNow({ ...base, args, status: 'pending', ...(timeout !== undefined ? { expiresInMs: timeout } : {}) });
          this.event('step.waiting', { stepId: id, step: name, attempt: 1, ...(pos.itemIndex !== null ? { itemIndex: pos.itemIndex } : {}), ...(args?.message !== undefined ? { message: args.message } : {}) });
          return;
        }
        case 'timer':
          return this.queue({ ...base, args: null, status: 'ready', ...(await this.timerReady(step, pos, extra)) });
        case 'signal': {
          const scope = await this.scopes.forStep(step, pos, extra);
          const w = await startSignalWait({ db: this.db, writer: this.writer, schema: this.deps.schema }, step, base, resolveSignalWait(step, scope));
          // The event says what the step waits for (names, key, since), as its row does.
          if (w.waiting) this.event('step.waiting', { stepId: w.id, step: name, attempt: 1, ...(pos.itemIndex !== null ? { itemIndex: pos.itemIndex } : {}), signal: w.wait });
          return;
        }
        case 'workflow': {
          const scope = await this.scopes.forStep(step, pos, extra);
          const deps = { schema: this.deps.schema, log: this.deps.log, caps: this.wf.flow.caps };
          // Awaited here, so a child that cannot start (unknown flow, too deep) fails the step below.
          return await startSubWorkflowStep({ db: this.db, writer: this.writer, deps }, step, base, scope);
        }
        // A pass step moves on at once, as a fork does: a done row, then its transition.
        case 'pass':
        case 'fork': {
          const scope = await this.scopes.forStep(step, pos, extra);
          const decision = resolveSuccess(this.wf.flow, name, { ...scope, result: await this.predecessorResult(step, pos) });
          const result = decision.kind === 'forEach' ? { items: decision.items } : decision.kind === 'parallel' ? { branches: decision.branches } : null;
          const opens = (decision.kind === 'forEach' && decision.items.length > 0) || (decision.kind === 'parallel' && decision.branches.length > 0);
          const id = await this.writer.insertNow({ ...base, args: null, status: 'done', result, fanoutOpen: opens });
          return this.apply(decision, { ...pos, id, name, attempt: 1, args: null });
        }
      }
    } catch (err) {
      if (!(err instanceof StepError)) throw err;
      // The step cannot even be created (a template names a missing value): it fails for good.
      // A sub-workflow that could not start keeps its own retryability (unknown_flow may be registered soon).
      const error: ErrorData = { ...err.toJSON(), step: name, retryable: err instanceof ChildStartError && err.retryable };
      const args = err instanceof ChildStartError ? err.request : null;
      const id = await this.writer.insertNow({ ...base, args, status: 'failed', error });
      const origin: Origin = { ...pos, id, name, attempt: 1, args };
      this.event('step.failed', { stepId: origin.id, step: name, attempt: 1, error });
      return this.apply(resolveFailure(this.wf.flow, name, 1, error, this.deps.random()), origin);
    }
  }

  /** What `result` means in a fork's branch conditions: the result of the step before it in its chain. */
  private async predecessorResult(step: CompiledStep, pos: Position): Promise<unknown> {
    const t = step.transition;
    if (t.kind !== 'parallel' || !t.conditions) return null;
    await this.flush();
    return (await getLatestDoneRowInChain(this.db, { workflowId: this.wf.id, ...pos }))?.result ?? null;
  }

  private async timerReady(step: CompiledStep, pos: Position, extra: object): Promise<{ readyInMs?: number; readyAt?: Date }> {
    if (!step.wait || 'ms' in step.wait) return { readyInMs: step.wait?.ms ?? 0 };
    const scope = await this.scopes.forStep(step, pos, extra);
    if ('duration' in step.wait) return { readyInMs: resolveWaitMs(step.name, step.wait.duration, scope) };
    const value = resolveTemplates(step.wait.until, scope);
    const at = new Date(typeof value === 'number' ? value : String(value));
    if (Number.isNaN(at.getTime())) throw new TemplateError(`wait.until of step "${step.name}" is not a date: ${JSON.stringify(value)}`);
    return { readyAt: at };
  }

  /**
   * Ends the workflow: written with the other workflows this transaction ends, in one statement
   * before it commits (TxWriter.endWorkflow); its live steps, and outcomes of it recorded but not
   * applied, are cancelled then. Nothing more of it is applied in this transaction.
   */
  async completeWorkflow(output: unknown): Promise<void> {
    if (this.finished) return;
    this.writer.cancelEnd(this.wf.id);
    // Its steps queued in this transaction would only be cancelled (and a claimed one run for nothing).
    this.writer.dropQueued(this.wf.id);
    this.writer.endWorkflow({ workflowId: this.wf.id, status: 'completed', output }, this.endUnapplied());
    this.ended_('completed');
  }

  async failWorkflow(error: ErrorData): Promise<void> {
    if (this.finished) return;
    this.writer.cancelEnd(this.wf.id);
    this.writer.dropQueued(this.wf.id);
    this.writer.endWorkflow({ workflowId: this.wf.id, status: 'failed', error }, this.endUnapplied());
    this.ended_('failed', error);
  }

  private endUnapplied(): string[] {
    const ids = this.unapplied();
    this.cancelUnapplied(ids);
    return ids;
  }

  private ended_(status: 'completed' | 'failed', error?: ErrorData): void {
    this.finished = true;
    if (status === 'completed') {
      this.event('workflow.completed');
      this.deps.log.info({ workflowId: this.wf.id, workflow: this.wf.name }, 'workflow completed');
    } else {
      this.event('workflow.failed', { error: { code: error!.code, message: error!.message } });
      this.deps.log.info({ workflowId: this.wf.id, workflow: this.wf.name, error }, 'workflow failed');
    }
  }

  /** A tool step that fans out over its result: its row now has a fan-out in progress. */
  private async markOpen(origin: Origin): Promise<void> {
    if (getStep(this.wf.flow, origin.name).kind !== 'fork') await setFanoutOpen(this.db, origin.id, true);
  }

  private queue(step: NewStep): void {
    const leaseMs = getStep(this.wf.flow, step.name).timeoutMs + this.deps.leaseGraceMs;
    this.writer.queue(this.wf.priority ? { ...step, priority: this.wf.priority } : step, { user: this.wf.createdBy, leaseMs });
  }

  /** Writes queued step rows (before anything reads the steps table). */
  async flush(): Promise<void> {
    await this.writer.flush();
  }
}
