/**
 * What the executor asks of tracing (ExecutorDeps.tracing): a span per step attempt, a child span
 * per tool call whose W3C `traceparent` the tool passes on (an `http.request` header, MCP
 * `_meta`), and the workflow span once a workflow ends. NO_TRACING does nothing and creates no
 * span; the OpenTelemetry implementation is OtelTracing (src/telemetry/otelTracing.ts), made by
 * tracingFromEnv only when the OTEL_* variables ask for it.
 */
import type { Queryable } from '../db/queries/common.js';

export interface StepSpanInfo {
  workflowId: string;
  stepId: string;
  stepName: string;
  attempt: number;
  tool: string | null;
}

/** How a step attempt ended, for its span: undefined when it produced no outcome here. */
export type SpanOutcome = { status: 'done' } | { status: 'failed'; error: { code?: string; message?: string } } | undefined;

export interface StepTrace {
  /** Runs one tool call in a child span; `fn` gets the `traceparent` to pass on (undefined when not traced). */
  toolCall<T>(tool: string, fn: (traceparent: string | undefined) => Promise<T>): Promise<T>;
  end(outcome: SpanOutcome): void;
}

export interface StepTracing {
  readonly enabled: boolean;
  startStep(info: StepSpanInfo): StepTrace;
  /** Workflows a committed transaction of this executor ended: records their workflow spans (reads their times). */
  workflowsEnded(db: Queryable, workflowIds: string[]): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

const NO_STEP_TRACE: StepTrace = Object.freeze({
  toolCall: <T>(_tool: string, fn: (traceparent: string | undefined) => Promise<T>) => fn(undefined),
  end: () => {},
});

export const NO_TRACING: StepTracing = Object.freeze({
  enabled: false,
  startStep: () => NO_STEP_TRACE,
  workflowsEnded: () => {},
  shutdown: async () => {},
});
