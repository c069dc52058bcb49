/**
 * A flow after validation: every step with its kind, its transition, and its policies in
 * milliseconds, conditions compiled once. This is what the executor caches per workflow.
 */
import type { Caps } from './caps.js';
import type { CompiledCondition } from './conditions.js';
import type { SchemaCheck } from './jsonSchema.js';
import type { CompiledSignalWait } from './compiledSignalWait.js';
import type { FlowSpec, StepSpec } from './spec.js';

/** `pass`: a step with no tool, approval, wait or fan-out (steps form): it does nothing and moves on at once. */
export type StepKind = 'tool' | 'gate' | 'timer' | 'fork' | 'pass' | 'workflow' | 'signal';
export type FanoutMode = 'failFast' | 'allSettled';

export type Transition =
  | { kind: 'next'; to: string }
  | { kind: 'branch'; cases: { condition: CompiledCondition; then: string }[]; default?: string }
  | {
      kind: 'parallel';
      branches: string[];
      /** Per branch (same order): the condition under which it starts, if any. */
      conditions?: (CompiledCondition | undefined)[];
      join?: string;
      mode: FanoutMode;
      policy?: ForkPolicy;
      /** At most this many branches live at once, started in listed order (absent: all at once). */
      concurrency?: number;
    }
  | { kind: 'forEach'; items: unknown; step: string; concurrency: number; as?: string; join?: string; mode: FanoutMode; policy?: ForkPolicy }
  /** End of a chain: arrive at the enclosing fan-out's join (seed form names it), or end the workflow. */
  | { kind: 'arrive'; join?: string }
  | { kind: 'done'; status: 'completed' | 'failed'; error?: string | { code: string; message: string } };

/**
 * When a fork's join is created (DESIGN §2d): after every branch (`all`, the default, and a
 * transition without a policy), after `n` branches completed (`first` is 1), or when `condition`
 * (CEL over results and completed) holds; then live branches are cancelled if `cancelRemaining`.
 */
export interface ForkPolicy {
  complete: { kind: 'all' } | { kind: 'atLeast'; n: number } | { kind: 'when'; condition: CompiledCondition };
  cancelRemaining: boolean;
}

export interface RetryPolicy {
  maxAttempts: number;
  /** Attempts lost to a dead executor or worker (not the step's fault), counted apart from maxAttempts. */
  maxLost: number;
  initialMs: number;
  multiplier: number;
  maxMs: number;
  jitter: boolean;
}
import type { KeyedConcurrency } from './keyedConcurrency.js';

export interface CompiledStep {
  name: string;
  kind: StepKind;
  spec: StepSpec;
  tool: string | null;
  /** The args template (JSON with {{…}}). */
  args: unknown;
  transition: Transition;
  retry: RetryPolicy;
  timeoutMs: number;
  onError?: string;
  approval?: {
    timeoutMs?: number;
    onTimeout: 'fail' | 'approve' | 'reject';
    /** A template, rendered into the gate row's args when it starts waiting. */
    message?: string;
    /** The approver's data (the readying's result) must match it. */
    schema?: SchemaCheck;
    /** User patterns (`*` any characters) that may ready the gate. */
    approvers?: string[];
  };
  /** `duration`: a template (`{{= input.minutes * 60000 }}`, `{{input.delay}}`) giving ms or a duration text. */
  wait?: { ms: number } | { until: string } | { duration: string };
  /** A sub-workflow step: the registered flow it starts (version null: the latest) and its input template. */
  workflow?: { name: string; version: number | null; input: unknown };
  /** A step that waits for a signal (signalWait.ts): its names, key template, since and timeout. */
  signal?: CompiledSignalWait;
  output?: unknown;
  /** Steps whose results this step's templates and conditions read (`steps.NAME…`). */
  stepRefs: string[];
  /** Whether this step's templates read `item`/`index` (or a forEach alias). */
  usesItem: boolean;
  /** A tool step's keyed concurrency (capacity.ts). */
  concurrency?: KeyedConcurrency;
}

export interface CompiledFlow {
  spec: FlowSpec;
  start: string;
  timeoutMs?: number;
  maxSteps: number;
  steps: Map<string, CompiledStep>;
  /** The flow's `inputSchema`, checked against the input at admission. */
  inputSchema?: SchemaCheck;
  /** forEach `as` aliases in use anywhere in the flow. */
  itemAliases: string[];
  /** The operator's caps it was compiled under (checked again at run time: forEach items, output). */
  caps?: Readonly<Caps>;
  /** The flow's keyed concurrency: at most `limit` workflows hold one key value at once (capacity.ts). */
  concurrency?: KeyedConcurrency;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 3, maxLost: 5, initialMs: 2_000, multiplier: 2, maxMs: 30_000, jitter: true };
export const DEFAULT_STEP_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_STEPS = 1_000;
/** A forEach without `concurrency` (lowered to caps.forEachConcurrency when caps apply). */
export const DEFAULT_FOREACH_CONCURRENCY = 10_000;

export function getStep(flow: CompiledFlow, name: string): CompiledStep {
  const step = flow.steps.get(name);
  if (!step) throw new Error(`flow has no step "${name}"`);
  return step;
}
