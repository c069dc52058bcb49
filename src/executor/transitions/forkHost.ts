/**
 * What the fan-out logic (forkSettlement.ts, forkCompletion.ts) needs of the workflow's Advance,
 * and where a step sits in the fan-outs: the interface both settle through, so that neither
 * imports the other for it, nor Advance. Types only.
 */
import type { ErrorData } from '../../errors.js';
import type { Queryable } from '../../db/queries.js';
import type { StepdEvent } from '../../events.js';
import type { TxWriter } from '../core/txWriter.js';
import type { WorkflowInfo } from '../core/workflowCache.js';
import type { ScopeBuilder } from './scope.js';

/** Where a step sits: the fan-out row that created its branch and its item there. */
export interface Position {
  fanoutId: string | null;
  itemIndex: number | null;
}

/** What the fan-out logic needs of the workflow's Advance. */
export interface ForkHost {
  readonly db: Queryable;
  readonly wf: WorkflowInfo;
  readonly writer: TxWriter;
  readonly scopes: ScopeBuilder;
  readonly ended: boolean;
  event(type: StepdEvent['type'], extra?: Partial<StepdEvent>): void;
  createStep(name: string, pos: Position, extra: { error?: ErrorData; results?: unknown; completed?: number; item?: unknown; index?: number }): Promise<void>;
  failWorkflow(error: ErrorData): Promise<void>;
  /** A chain ended outside any fan-out: the workflow completes with `output` if nothing else is live. */
  endTopChain(output: unknown): Promise<void>;
  flush(): Promise<void>;
  /** Steps whose outcome is recorded but not applied yet: a failing fork cancels those below it. */
  cancelUnapplied(ids: string[]): void;
  unapplied(): string[];
}
