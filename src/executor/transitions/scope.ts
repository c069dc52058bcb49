/**
 * Builds the template scope a step's templates and conditions read: input, workflow, the
 * latest results of the steps it names, and — inside a forEach — its item and index.
 * Reads only what the step's compiled references say it needs. Inside forEach items,
 * `steps.NAME` prefers the rows of the reader's own item (see getLatestDoneResultsInItems).
 */
import type { CompiledStep } from '../../flow/compiled.js';
import { getStep } from '../../flow/compiled.js';
import { FAILED_STEPS, resolveTemplates, type TemplateScope } from '../../flow/templates.js';
import {
  getForkItem,
  getForkItems,
  getForkRowAndAncestors,
  getStepResult,
  getLatestDoneResults,
  getLatestDoneResultsInItems,
  type ForkRow,
  type ItemPosition,
  type Queryable,
} from '../../db/queries.js';
import type { WorkflowInfo } from '../core/workflowCache.js';

export interface ScopeExtras {
  result?: unknown;
  results?: unknown;
  /** In a join: how many branches of its fork completed. */
  completed?: number;
  error?: unknown;
  item?: unknown;
  index?: number;
}

type Position = { fanoutId: string | null; itemIndex: number | null };

export class ScopeBuilder {
  /** Fork rows read in this transaction; a fork row does not change once its branches exist. */
  private readonly forks = new Map<string, ForkRow>();

  constructor(
    private readonly db: Queryable,
    private readonly wf: WorkflowInfo,
    /** Called before reading the steps table, so rows queued in this transaction are visible. */
    private readonly beforeRead: () => Promise<void>,
  ) {}

  base(): TemplateScope {
    return { input: this.wf.input, workflow: { id: this.wf.id, name: this.wf.name } };
  }

  async forStep(step: CompiledStep, pos: Position, extras: ScopeExtras): Promise<TemplateScope> {
    const scope: TemplateScope = this.base();
    for (const [k, v] of Object.entries(extras)) if (v !== undefined) scope[k] = v;
    if (step.stepRefs.length > 0) {
      await this.beforeRead();
      const items = await this.enclosingItems(pos);
      const results =
        items.length > 0
          ? await getLatestDoneResultsInItems(this.db, this.wf.id, step.stepRefs, items)
          : await getLatestDoneResults(this.db, this.wf.id, step.stepRefs);
      const steps: Record<string, { result: unknown }> = {};
      for (const [name, result] of results) steps[name] = { result };
      scope.steps = steps;
      const missing = step.stepRefs.filter((name) => !results.has(name));
      if (missing.length > 0) (scope as { [FAILED_STEPS]?: ReadonlySet<string> })[FAILED_STEPS] = await this.failedAmong(missing);
    } else {
      scope.steps = {};
    }
    if (step.usesItem && scope.item === undefined && pos.fanoutId !== null) {
      const found = await this.itemAt(pos);
      if (found) {
        scope.item = found.item;
        scope.index = found.index;
        if (found.alias) scope[found.alias] = found.item;
      }
    } else if (scope.item !== undefined && pos.fanoutId !== null) {
      const fork = await this.fork(pos.fanoutId);
      const t = fork ? getStep(this.wf.flow, fork.name).transition : undefined;
      if (t?.kind === 'forEach' && t.as) scope[t.as] = scope.item;
    }
    return scope;
  }

  /**
   * Which of the steps a scope names but has no result for have a failed row: their templates
   * then say the step failed. Read only when a named step has no result (one indexed statement).
   */
  private async failedAmong(names: string[]): Promise<ReadonlySet<string>> {
    const { rows } = await this.db.query<{ name: string }>({
      name: 'stepd_scope_failed_steps',
      text: `SELECT DISTINCT name FROM workflow_steps WHERE workflow_id = $1 AND name = ANY($2::text[]) AND status = 'failed'`,
      values: [this.wf.id, names],
    });
    return new Set(rows.map((r) => r.name));
  }

  /**
   * A fork row by id. A miss reads it with every fork row above it in one statement, so walking
   * up from a branch however deep costs one round trip per transaction.
   */
  async fork(id: string): Promise<ForkRow | undefined> {
    const hit = this.forks.get(id);
    if (hit) return hit;
    await this.beforeRead();
    this.rememberForks(await getForkRowAndAncestors(this.db, id));
    return this.forks.get(id);
  }

  /** A fork row's result (a fork without a tool lists its items or branches there). */
  async forkResult(id: string): Promise<unknown> {
    await this.beforeRead();
    return getStepResult(this.db, id);
  }

  /** Fork rows read by another statement (they do not change once their branches exist). */
  rememberForks(rows: ForkRow[]): void {
    for (const row of rows) if (!this.forks.has(row.id)) this.forks.set(row.id, row);
  }

  /** The forEach items enclosing a position, innermost first. */
  private async enclosingItems(pos: Position): Promise<ItemPosition[]> {
    const out: ItemPosition[] = [];
    let cur = pos;
    while (cur.fanoutId !== null) {
      const fork = await this.fork(cur.fanoutId);
      if (!fork) break;
      if (getStep(this.wf.flow, fork.name).transition.kind === 'forEach' && cur.itemIndex !== null) {
        out.push({ forkId: fork.id, index: cur.itemIndex });
      }
      cur = { fanoutId: fork.fanout_id, itemIndex: fork.item_index };
    }
    return out;
  }

  /** Walks up the fan-outs enclosing a position to the nearest forEach and reads its item. */
  private async itemAt(pos: Position): Promise<{ item: unknown; index: number; alias?: string } | undefined> {
    let cur = pos;
    while (cur.fanoutId !== null) {
      const fork = await this.fork(cur.fanoutId);
      if (!fork) return undefined;
      const forkStep = getStep(this.wf.flow, fork.name);
      if (forkStep.transition.kind === 'forEach' && cur.itemIndex !== null) {
        const item = await forkItemAt(this.db, fork, forkStep, cur.itemIndex, this);
        const out: { item: unknown; index: number; alias?: string } = { item, index: cur.itemIndex };
        if (forkStep.transition.as) out.alias = forkStep.transition.as;
        return out;
      }
      cur = { fanoutId: fork.fanout_id, itemIndex: fork.item_index };
    }
    return undefined;
  }
}

/**
 * The items of a forEach fan-out. A fork without a tool stored them as its result (read one at a
 * time, so a long list is not fetched on every arrival); a tool step that fans out over its own
 * result has them re-resolved from that result.
 */
async function resolvedItems(db: Queryable, fork: ForkRow, forkStep: CompiledStep, scopes: ScopeBuilder): Promise<unknown[]> {
  const t = forkStep.transition;
  if (t.kind !== 'forEach') return [];
  const result = await getStepResult(db, fork.id);
  const scope = await scopes.forStep(forkStep, { fanoutId: fork.fanout_id, itemIndex: fork.item_index }, { result });
  const items = resolveTemplates(t.items, scope);
  return Array.isArray(items) ? items : [];
}

export async function forkItemCount(db: Queryable, fork: ForkRow, forkStep: CompiledStep, scopes: ScopeBuilder): Promise<number> {
  if (forkStep.transition.kind !== 'forEach') return 0;
  if (forkStep.kind === 'fork') return fork.item_count ?? 0;
  return (await resolvedItems(db, fork, forkStep, scopes)).length;
}

/** Items `from` … `to - 1` of a forEach fan-out: one read for a fork without a tool. */
export async function forkItemsFrom(db: Queryable, fork: ForkRow, forkStep: CompiledStep, from: number, to: number, scopes: ScopeBuilder): Promise<unknown[]> {
  if (to <= from) return [];
  if (forkStep.kind === 'fork') return getForkItems(db, fork.id, from, to - from);
  return (await resolvedItems(db, fork, forkStep, scopes)).slice(from, to);
}

export async function forkItemAt(db: Queryable, fork: ForkRow, forkStep: CompiledStep, index: number, scopes: ScopeBuilder): Promise<unknown> {
  if (forkStep.kind === 'fork') return (await getForkItem(db, fork.id, index)).item;
  return (await resolvedItems(db, fork, forkStep, scopes))[index];
}
