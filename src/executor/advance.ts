/**
 * One workflow transition, inside one transaction that holds the workflow row lock: record a
 * step's outcome (fenced), ask the pure resolver what comes next, and write it — new steps,
 * fan-outs, joins, retries, or the end of the workflow. Events are NOTIFYed in the same
 * transaction, so they are delivered only if it commits.
 */
import { StepError, TemplateError, type ErrorData } from '../errors.js';
import { getStep, type CompiledStep } from '../flow/compiled.js';
import { resolveTemplates } from '../flow/templates.js';
import { renderGateArgs } from '../flow/gateArgs.js';
import { valueCapError } from '../flow/caps.js';
import { resolveFailure, resolveSuccess, type Decision } from '../flow/transitions.js';
import {
  cancelLiveStepsInFanout,
  endWorkflowCancellingLiveSteps,
  failForkRowsIfDone,
  getFanoutOutcomeTree,
  getFanoutProgress,
  getPrecedingRowInChain,
  setFanoutOpen,
  type FanoutOutcome,
  type ForkRow,
  type NewStep,
  type Queryable,
} from '../db/queries.js';
import type { StepdEvent } from '../events.js';
import type { TxWriter } from './txWriter.js';
import type { Logger } from '../logger.js';
import type { WorkflowInfo } from './workflowCache.js';
import { ScopeBuilder, forkItemAt, forkItemCount } from './scope.js';
import { startSubWorkflowStep } from './subWorkflows.js';
import { ChildStartError } from '../flow/subWorkflow.js';

export interface AdvanceDeps {
  schema: string;
  log: Logger;
  random: () => number;
  emitEvents: boolean;
  /** Added to a step's timeout for the lease of a step claimed as it is created. */
  leaseGraceMs: number;
}

/** Where a step sits: the fan-out row that created its branch and its item there. */
export interface Position {
  fanoutId: string | null;
  itemIndex: number | null;
}

/** The row a decision continues from. */
export interface Origin extends Position {
  id: string;
  name: string;
  attempt: number;
  args: unknown;
  /** On a retry row: its step's first attempt. */
  firstAttemptId?: string | null;
}

export type Outcome = { status: 'done'; result: unknown } | { status: 'failed'; error: ErrorData & { retryAfterMs?: number } };

/**
 * State of one workflow within one transaction. Writes go through the transaction's TxWriter,
 * which several Advances (one per workflow) may share.
 */
export class Advance {
  private finished = false;
  /**
   * The results of the fan-outs computed in this transaction, by fork row id, with the fork
   * above them: an enclosing fan-out that settles next reuses them instead of reading below
   * again, so settling M nested forks reads each level once.
   */
  private readonly results = new Map<string, { parent: string | null; value: unknown }>();
  /** Steps that fork without a join: a branch ending there has that fan-out's results as its value. */
  private joinlessForks: string[] | undefined;
  readonly scopes: ScopeBuilder;

  constructor(
    private readonly db: Queryable,
    private readonly deps: AdvanceDeps,
    private readonly wf: WorkflowInfo,
    private readonly writer: TxWriter,
  ) {
    this.scopes = new ScopeBuilder(db, wf, () => this.flush());
  }

  /** True once the workflow reached a terminal state in this transaction. */
  get ended(): boolean {
    return this.finished;
  }

  event(type: StepdEvent['type'], extra: Partial<StepdEvent> = {}): void {
    this.writer.event({ type, schema: this.deps.schema, workflowId: this.wf.id, at: new Date().toISOString(), ...extra });
  }

  /** Applies a step's outcome, already recorded on `origin`'s row. */
  async afterOutcome(origin: Origin, outcome: Outcome): Promise<void> {
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
      await this.apply(resolveFailure(flow, origin.name, origin.attempt, outcome.error, this.deps.random()), origin);
    }
  }

  /**
   * For a step that some step's `onError` names: the error that routed there (its predecessor in
   * the chain, when that is a failed attempt of such a step), so `{{error}}` resolves in its
   * conditions and output as it did in its args.
   */
  private async handledError(origin: Origin): Promise<ErrorData | undefined> {
    const steps = [...this.wf.flow.steps.values()];
    if (!steps.some((s) => s.onError === origin.name)) return undefined;
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
        if (decision.branches.length === 0) return this.fanoutSettled(await this.forkRow(origin.id));
        await this.markOpen(origin);
        for (const [i, branch] of decision.branches.entries()) {
          await this.createStep(branch, { fanoutId: origin.id, itemIndex: i }, {});
        }
        return;
      }
      case 'forEach': {
        if (decision.items.length === 0) return this.fanoutSettled(await this.forkRow(origin.id));
        await this.markOpen(origin);
        const n = Math.min(decision.concurrency, decision.items.length);
        for (let i = 0; i < n; i++) {
          await this.createStep(decision.step, { fanoutId: origin.id, itemIndex: i }, { item: decision.items[i], index: i });
        }
        return;
      }
      case 'arrive':
        return this.arrive(pos, decision.output);
      case 'complete':
        return this.completeWorkflow(decision.output);
      case 'failWorkflow':
        return this.failWorkflow(decision.error);
      case 'failBranch':
        return this.failBranch(pos, decision.error);
    }
  }

  /**
   * A branch at `pos` failed for good. An allSettled fan-out records it and goes on; a failFast
   * one fails as a whole: its live branches are cancelled, its fork row takes the error, and the
   * fork's own onError — or else the level above — handles it, up to failing the workflow.
   * However many nested forks the failure goes up through, their rows are failed in one
   * statement and the live steps below the outermost are cancelled in one.
   */
  private async failBranch(pos: Position, error: ErrorData): Promise<void> {
    const failing: ForkRow[] = [];
    let then: () => Promise<void>;
    for (let cur = pos; ; ) {
      if (cur.fanoutId === null) {
        then = () => this.failWorkflow(error);
        break;
      }
      const fork = await this.forkRow(cur.fanoutId);
      const forkStep = getStep(this.wf.flow, fork.name);
      const t = forkStep.transition;
      if ((t.kind === 'parallel' || t.kind === 'forEach') && t.mode === 'allSettled') {
        const at = cur;
        then = () => this.arrive(at, null);
        break;
      }
      const forkPos: Position = { fanoutId: fork.fanout_id, itemIndex: fork.item_index };
      if (forkPos.fanoutId === null && forkStep.onError === undefined) {
        then = () => this.failWorkflow(error);
        break;
      }
      failing.push(fork);
      const onError = forkStep.onError;
      if (onError !== undefined) {
        then = () => this.createStep(onError, forkPos, { error });
        break;
      }
      cur = forkPos;
    }
    if (failing.length > 0) {
      await this.flush();
      this.writer.cancelledRunning.push(...(await cancelLiveStepsInFanout(this.db, failing[failing.length - 1]!.id)));
      await failForkRowsIfDone(this.db, failing.map((f) => f.id), error);
      for (const f of failing) this.event('step.failed', { stepId: f.id, step: f.name, attempt: 1, error });
    }
    return then();
  }

  /** A chain ended at `pos`: arrive at its fan-out, or end the workflow if nothing else is live. */
  private async arrive(pos: Position, output: unknown): Promise<void> {
    if (pos.fanoutId === null) {
      const tooLarge = this.wf.flow.caps && valueCapError('the workflow output', output, 'outputBytes', this.wf.flow.caps);
      if (tooLarge) return this.failWorkflow(tooLarge);
      this.writer.completeIfIdle(this.wf.id, output, (completed) => completed && this.ended_('completed'));
      return;
    }
    const fork = await this.forkRow(pos.fanoutId);
    const forkStep = getStep(this.wf.flow, fork.name);
    const t = forkStep.transition;
    await this.flush();
    const progress = await getFanoutProgress(this.db, fork.id);
    if (t.kind === 'forEach' && progress.started < (await forkItemCount(this.db, fork, forkStep, this.scopes))) {
      const i = progress.started;
      const item = await forkItemAt(this.db, fork, forkStep, i, this.scopes);
      await this.createStep(t.step, { fanoutId: fork.id, itemIndex: i }, { item, index: i });
      return;
    }
    if (progress.live > 0) return;
    await this.fanoutSettled(fork);
  }

  /** Every branch of a fan-out instance finished: create its join once, or end its chain. */
  private async fanoutSettled(fork: ForkRow): Promise<void> {
    await this.flush();
    await setFanoutOpen(this.db, fork.id, false);
    const t = getStep(this.wf.flow, fork.name).transition;
    if (t.kind !== 'parallel' && t.kind !== 'forEach') throw new Error(`step "${fork.name}" is not a fan-out`);
    const results = await this.fanoutResults(fork);
    const pos: Position = { fanoutId: fork.fanout_id, itemIndex: fork.item_index };
    if (t.join !== undefined) return this.createStep(t.join, pos, { results });
    return this.arrive(pos, results);
  }

  /**
   * What the join of a settled fan-out instance sees as `{{results}}`: each branch's last row,
   * by branch name (parallel) or in input order (forEach); with allSettled, each outcome. A
   * branch that ended in a fork without a join has that fan-out's results as its value. The
   * last rows of the whole instance, nested join-less fan-outs included, are read in one
   * statement; fan-outs whose results this transaction already computed are not read again.
   */
  private async fanoutResults(fork: ForkRow): Promise<unknown> {
    const known = this.results.get(fork.id);
    if (known) return known.value;
    const descend = this.joinless();
    const skip = [...this.results].filter(([, r]) => r.parent === fork.id).map(([id]) => id);
    await this.flush();
    const rows = await getFanoutOutcomeTree(this.db, fork.id, descend, skip);
    this.scopes.rememberForks(rows.filter((r) => r.status === 'done' && descend.includes(r.name)));
    const byFork = new Map<string, FanoutOutcome[]>();
    for (const r of rows) {
      const list = byFork.get(r.fanout_id);
      if (list) list.push(r);
      else byFork.set(r.fanout_id, [r]);
    }
    return this.resultsOf(fork, byFork);
  }

  private async resultsOf(fork: ForkRow, byFork: Map<string, FanoutOutcome[]>): Promise<unknown> {
    const known = this.results.get(fork.id);
    if (known) return known.value;
    const forkStep = getStep(this.wf.flow, fork.name);
    const t = forkStep.transition;
    if (t.kind !== 'parallel' && t.kind !== 'forEach') throw new Error(`step "${fork.name}" is not a fan-out`);
    const outcomes = byFork.get(fork.id) ?? [];
    const value = async (o: FanoutOutcome): Promise<unknown> => {
      if (o.status === 'done' && this.joinless().includes(o.name)) return this.resultsOf(await this.forkRow(o.id), byFork);
      return o.result;
    };
    const entry = async (o: FanoutOutcome | undefined): Promise<unknown> => {
      if (t.mode !== 'allSettled') return o ? ((await value(o)) ?? null) : null;
      if (!o) return { status: 'skipped' };
      return o.status === 'done' ? { status: 'done', result: await value(o) } : { status: o.status, error: o.error };
    };
    let out: unknown;
    if (t.kind === 'forEach') {
      const byIndex = new Map(outcomes.map((o) => [o.item_index, o]));
      const count = await forkItemCount(this.db, fork, forkStep, this.scopes);
      const list: unknown[] = [];
      for (let i = 0; i < count; i++) list.push(await entry(byIndex.get(i)));
      out = list;
    } else {
      const obj: Record<string, unknown> = {};
      for (const [i, b] of t.branches.entries()) obj[b] = await entry(outcomes.find((o) => o.item_index === i));
      out = obj;
    }
    this.results.set(fork.id, { parent: fork.fanout_id, value: out });
    return out;
  }

  private joinless(): string[] {
    this.joinlessForks ??= [...this.wf.flow.steps.values()]
      .filter((s) => (s.transition.kind === 'parallel' || s.transition.kind === 'forEach') && s.transition.join === undefined)
      .map((s) => s.name);
    return this.joinlessForks;
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
  async createStep(name: string, pos: Position, extra: { error?: ErrorData; results?: unknown; item?: unknown; index?: number }): Promise<void> {
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
          return this.queue({ ...base, args: resolveTemplates(step.args, scope), status: 'ready', readyInMs: 0 });
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
          const decision = resolveSuccess(this.wf.flow, name, { ...scope, result: null });
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

  private async timerReady(step: CompiledStep, pos: Position, extra: object): Promise<{ readyInMs?: number; readyAt?: Date }> {
    if (!step.wait || 'ms' in step.wait) return { readyInMs: step.wait?.ms ?? 0 };
    const scope = await this.scopes.forStep(step, pos, extra);
    const value = resolveTemplates(step.wait.until, scope);
    const at = new Date(typeof value === 'number' ? value : String(value));
    if (Number.isNaN(at.getTime())) throw new TemplateError(`wait.until of step "${step.name}" is not a date: ${JSON.stringify(value)}`);
    return { readyAt: at };
  }

  async completeWorkflow(output: unknown): Promise<void> {
    if (this.finished) return;
    this.writer.cancelEnd(this.wf.id);
    await this.flush();
    this.writer.cancelledRunning.push(...(await endWorkflowCancellingLiveSteps(this.db, this.wf.id, { status: 'completed', output })));
    this.ended_('completed');
  }

  async failWorkflow(error: ErrorData): Promise<void> {
    if (this.finished) return;
    this.writer.cancelEnd(this.wf.id);
    this.writer.dropQueued(this.wf.id);
    this.writer.cancelledRunning.push(...(await endWorkflowCancellingLiveSteps(this.db, this.wf.id, { status: 'failed', error })));
    this.ended_('failed', error);
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

  /** A fork row's identity and item count never change, so one read per transaction is enough. */
  private async forkRow(id: string): Promise<ForkRow> {
    const row = await this.scopes.fork(id);
    if (!row) throw new Error(`fan-out row ${id} not found`);
    return row;
  }

  private async queue(step: NewStep): Promise<void> {
    const leaseMs = getStep(this.wf.flow, step.name).timeoutMs + this.deps.leaseGraceMs;
    this.writer.queue(step, { user: this.wf.createdBy, leaseMs });
  }

  /** Writes queued step rows (before anything reads the steps table). */
  async flush(): Promise<void> {
    await this.writer.flush();
  }
}
