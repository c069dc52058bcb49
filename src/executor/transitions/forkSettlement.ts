/**
 * The fan-outs of one workflow within one transaction: branches arriving at their fork, forks
 * settling (their join created exactly once), and failFast forks failing.
 *
 * Arrivals are deferred: a batch first applies every outcome it recorded (creating their next
 * steps), then settles the arrivals, one check per fork however many of its branches arrived.
 * So many items of one `forEach` settle in one transaction, and the check sees every outcome of
 * the batch applied: a step whose outcome is recorded but not yet applied never makes a fork
 * look idle before its branch moved on. A fork settles at most once per transaction; arrivals
 * at a fork failed in this transaction (or below one) change nothing, as if they had come
 * before the failure.
 */
import type { ErrorData } from '../../errors.js';
import { getStep } from '../../flow/compiled.js';
import {
  cancelLiveStepsInFanout,
  failForkRowsIfDone,
  getFanoutOutcomeTree,
  getFanoutProgress,
  setFanoutOpen,
  type FanoutOutcome,
  type ForkRow,
  type Queryable,
} from '../../db/queries.js';
import type { StepdEvent } from '../../events.js';
import type { TxWriter } from '../core/txWriter.js';
import type { WorkflowInfo } from '../core/workflowCache.js';
import { forkItemCount, forkItemsFrom, type ScopeBuilder } from './scope.js';
import { settleByPolicy, settlesByPolicy, type PolicySettler } from './forkCompletion.js';
import { ALL_BRANCHES, joinVerdict, safeVerdict } from '../../flow/joinPolicy.js';
import type { ForkHost, Position } from './forkHost.js';

export type { ForkHost, Position } from './forkHost.js';

export class ForkSettlement implements PolicySettler {
  /** Branches that arrived at each fork and are not settled yet (fork id → how many). */
  private readonly pending = new Map<string, number>();
  /** Forks settled in this transaction: later arrivals there are late. */
  private readonly settled = new Set<string>();
  /** FailFast forks failed in this transaction: nothing below them moves on. */
  private readonly failed = new Set<string>();
  /**
   * The results of the fan-outs computed in this transaction, by fork row id, with the fork
   * above them: an enclosing fan-out that settles next reuses them instead of reading below
   * again, so settling M nested forks reads each level once.
   */
  private readonly results = new Map<string, { parent: string | null; value: unknown; completed: number }>();
  /** Steps that fork without a join: a branch ending there has that fan-out's results as its value. */
  private joinlessForks: string[] | undefined;

  constructor(readonly host: ForkHost) {}

  /** A chain ended at `pos`: the end of the workflow, or an arrival at its fork (settled later). */
  async arrive(pos: Position, output: unknown): Promise<void> {
    if (pos.fanoutId === null) return this.host.endTopChain(output);
    this.pending.set(pos.fanoutId, (this.pending.get(pos.fanoutId) ?? 0) + 1);
  }

  /** Whether arrivals wait to be settled. */
  get waiting(): boolean {
    return this.pending.size > 0;
  }

  /**
   * Settles every pending arrival: per fork, starts the next `forEach` items (one per arrival,
   * within the items left), or, with nothing left to start and no branch live, settles it once.
   * A settled fork arrives at the fork above it, settled in the same loop.
   */
  async settleArrivals(): Promise<void> {
    while (this.pending.size > 0) {
      if (this.host.ended) {
        this.pending.clear();
        return;
      }
      // Innermost first (the newest fork row): an enclosing fork then sees its inner ones settled.
      const forkId = [...this.pending.keys()].reduce((a, b) => (BigInt(b) > BigInt(a) ? b : a));
      const arrived = this.pending.get(forkId)!;
      this.pending.delete(forkId);
      await this.settleAt(forkId, arrived);
    }
  }

  private async settleAt(forkId: string, arrived: number): Promise<void> {
    if (this.settled.has(forkId) || (await this.underFailedFork(forkId))) return;
    const fork = await this.forkRow(forkId);
    const forkStep = getStep(this.host.wf.flow, fork.name);
    const t = forkStep.transition;
    if (settlesByPolicy(forkStep)) return settleByPolicy(this, fork);
    await this.host.flush();
    const progress = await getFanoutProgress(this.host.db, fork.id);
    if (t.kind === 'forEach') {
      const count = await forkItemCount(this.host.db, fork, forkStep, this.host.scopes);
      if (progress.started < count) {
        // One new item per branch that arrived, within the items left (the window moves on).
        const end = Math.min(count, progress.started + arrived);
        const items = await forkItemsFrom(this.host.db, fork, forkStep, progress.started, end, this.host.scopes);
        for (let i = progress.started; i < end; i++) {
          await this.host.createStep(t.step, { fanoutId: fork.id, itemIndex: i }, { item: items[i - progress.started], index: i });
        }
        return;
      }
    }
    if (progress.live > 0) return;
    await this.settle(fork);
  }

  /** Whether `forkId` or a fork above it failed in this transaction. */
  private async underFailedFork(forkId: string): Promise<boolean> {
    if (this.failed.size === 0) return false;
    for (let id: string | null = forkId; id !== null; ) {
      if (this.failed.has(id)) return true;
      id = (await this.forkRow(id)).fanout_id;
    }
    return false;
  }

  /**
   * A fork that started no branch (none listed, no item, no condition held): its join now — or,
   * under a policy that needs completed branches, join_unreachable.
   */
  async settleEmpty(fork: ForkRow): Promise<void> {
    const forkStep = getStep(this.host.wf.flow, fork.name);
    const t = forkStep.transition;
    const policy = (t.kind === 'parallel' || t.kind === 'forEach' ? t.policy : undefined) ?? ALL_BRANCHES;
    let vars: Record<string, unknown> = {};
    if (policy.complete.kind === 'when') {
      const scope = await this.host.scopes.forStep(forkStep, { fanoutId: fork.fanout_id, itemIndex: fork.item_index }, {});
      vars = { ...scope, results: await this.resultsNow(fork), completed: 0 };
    }
    const verdict = safeVerdict(() => joinVerdict(policy, { total: 0, completed: 0, finished: 0 }, () => vars, fork.name), fork.name);
    if (verdict.kind === 'unreachable') return this.failFork(fork, verdict.error);
    return this.settle(fork);
  }

  /**
   * The fork's join is due (every branch finished, or its policy held): create it once, or end its
   * chain. `cancelLive`: its branches still live are cancelled first (tools aborted, retries stopped).
   */
  async settle(fork: ForkRow, options: { cancelLive?: boolean } = {}): Promise<void> {
    if (this.settled.has(fork.id)) return;
    this.settled.add(fork.id);
    await this.host.flush();
    if (options.cancelLive) {
      const cancelled = await cancelLiveStepsInFanout(this.host.db, fork.id, this.host.unapplied());
      this.host.writer.cancelledRunning.push(...cancelled.running);
      this.host.cancelUnapplied(cancelled.unapplied);
    }
    await setFanoutOpen(this.host.db, fork.id, false);
    const t = getStep(this.host.wf.flow, fork.name).transition;
    if (t.kind !== 'parallel' && t.kind !== 'forEach') throw new Error(`step "${fork.name}" is not a fan-out`);
    const results = await this.fanoutResults(fork);
    const completed = this.results.get(fork.id)?.completed ?? 0;
    const pos: Position = { fanoutId: fork.fanout_id, itemIndex: fork.item_index };
    if (t.join !== undefined) return this.host.createStep(t.join, pos, { results, completed });
    return this.arrive(pos, results);
  }

  /** The fork's results as they stand, for complete.when (computed again when it settles). */
  async resultsNow(fork: ForkRow): Promise<unknown> {
    const value = await this.fanoutResults(fork);
    this.results.delete(fork.id);
    return value;
  }

  /** The fork itself fails (join_unreachable): like a failFast fork whose branch failed, whatever its mode. */
  async failFork(fork: ForkRow, error: ErrorData): Promise<void> {
    return this.failUpward({ fanoutId: fork.id, itemIndex: null }, error, fork.id);
  }

  /**
   * A branch at `pos` failed for good. An allSettled fan-out records it and goes on; a failFast
   * one fails as a whole: its live branches are cancelled, its fork row takes the error, and the
   * fork's own onError — or else the level above — handles it, up to failing the workflow.
   * However many nested forks the failure goes up through, their rows are failed in one
   * statement and the live steps below the outermost are cancelled in one.
   */
  async failBranch(pos: Position, error: ErrorData): Promise<void> {
    return this.failUpward(pos, error, undefined);
  }

  private async failUpward(pos: Position, error: ErrorData, forced: string | undefined): Promise<void> {
    const failing: ForkRow[] = [];
    let then: () => Promise<void>;
    for (let cur = pos; ; ) {
      if (cur.fanoutId === null) {
        then = () => this.host.failWorkflow(error);
        break;
      }
      const fork = await this.forkRow(cur.fanoutId);
      const forkStep = getStep(this.host.wf.flow, fork.name);
      const t = forkStep.transition;
      if ((t.kind === 'parallel' || t.kind === 'forEach') && t.mode === 'allSettled' && fork.id !== forced) {
        const at = cur;
        then = () => this.arrive(at, null);
        break;
      }
      const forkPos: Position = { fanoutId: fork.fanout_id, itemIndex: fork.item_index };
      if (forkPos.fanoutId === null && forkStep.onError === undefined) {
        then = () => this.host.failWorkflow(error);
        break;
      }
      failing.push(fork);
      const onError = forkStep.onError;
      if (onError !== undefined) {
        then = () => this.host.createStep(onError, forkPos, { error });
        break;
      }
      cur = forkPos;
    }
    if (failing.length > 0) {
      await this.host.flush();
      const cancelled = await cancelLiveStepsInFanout(this.host.db, failing[failing.length - 1]!.id, this.host.unapplied());
      this.host.writer.cancelledRunning.push(...cancelled.running);
      this.host.cancelUnapplied(cancelled.unapplied);
      await failForkRowsIfDone(this.host.db, failing.map((f) => f.id), error);
      for (const f of failing) {
        this.failed.add(f.id);
        this.host.event('step.failed', { stepId: f.id, step: f.name, attempt: 1, error });
      }
    }
    return then();
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
    await this.host.flush();
    const rows = await getFanoutOutcomeTree(this.host.db, fork.id, descend, skip);
    this.host.scopes.rememberForks(rows.filter((r) => r.status === 'done' && descend.includes(r.name)));
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
    const forkStep = getStep(this.host.wf.flow, fork.name);
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
    // A branch still live when the fork joined early has no value yet: null (its row may be mid-chain).
    const finished = (o: FanoutOutcome | undefined) => (o && !o.fanout_open && (o.status === 'done' || o.status === 'failed' || o.status === 'cancelled') ? o : undefined);
    const completed = outcomes.filter((o) => o.status === 'done' && !o.fanout_open).length;
    if (t.kind === 'forEach') {
      const byIndex = new Map(outcomes.map((o) => [o.item_index, o]));
      const count = await forkItemCount(this.host.db, fork, forkStep, this.host.scopes);
      const list: unknown[] = [];
      for (let i = 0; i < count; i++) list.push(await entry(finished(byIndex.get(i))));
      out = list;
    } else {
      const obj: Record<string, unknown> = {};
      for (const [i, b] of t.branches.entries()) obj[b] = await entry(finished(outcomes.find((o) => o.item_index === i)));
      out = obj;
    }
    this.results.set(fork.id, { parent: fork.fanout_id, value: out, completed });
    return out;
  }

  private joinless(): string[] {
    this.joinlessForks ??= [...this.host.wf.flow.steps.values()]
      .filter((s) => (s.transition.kind === 'parallel' || s.transition.kind === 'forEach') && s.transition.join === undefined)
      .map((s) => s.name);
    return this.joinlessForks;
  }

  /** The mode of the fan-out a position is a branch of (null at the top level). */
  async enclosingMode(pos: Position): Promise<'failFast' | 'allSettled' | null> {
    if (pos.fanoutId === null) return null;
    const t = getStep(this.host.wf.flow, (await this.forkRow(pos.fanoutId)).name).transition;
    return t.kind === 'parallel' || t.kind === 'forEach' ? t.mode : null;
  }

  /** A fork row's identity and item count never change, so one read per transaction is enough. */
  async forkRow(id: string): Promise<ForkRow> {
    const row = await this.host.scopes.fork(id);
    if (!row) throw new Error(`fan-out row ${id} not found`);
    return row;
  }
}
