/**
 * The trace of a workflow, derived from its identity: a workflow's steps run on any executor,
 * across restarts and redrives, and each executor computes the same trace id and the same
 * workflow span id from (database, schema, workflow id) alone, with nothing stored. Every step
 * span is a child of that workflow span; the span itself is recorded once, when the workflow
 * ends, by the executor whose transaction ended it (docs/operations.md, "Traces").
 *
 * `database` identifies the PostgreSQL cluster and database (its system identifier and name),
 * so workflow 42 of two deployments exporting to one collector get different traces.
 */
import { createHash } from 'node:crypto';

export interface WorkflowTraceIds {
  /** 32 lower-case hex digits, never all zeros. */
  traceId: string;
  /** 16 lower-case hex digits, never all zeros: the workflow span. */
  spanId: string;
}

export function workflowTraceIds(database: string, schema: string, workflowId: string): WorkflowTraceIds {
  const hex = createHash('sha256').update(`stepd\0${database}\0${schema}\0${workflowId}`).digest('hex');
  return { traceId: nonZero(hex.slice(0, 32)), spanId: nonZero(hex.slice(32, 48)) };
}

function nonZero(hex: string): string {
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}

/** The W3C traceparent header of a span context (version 00). */
export function traceparentOf(ctx: { traceId: string; spanId: string; traceFlags: number }): string {
  return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}
