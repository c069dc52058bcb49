/**
 * StepTracing over an OpenTelemetry Tracer (from a TracerProvider this daemon made; nothing is
 * registered globally). Spans:
 *   workflow <name>   the workflow, recorded once it ended (admitted → ended), by the executor
 *                     that ended it; trace id and span id derived from the workflow (workflowTraceIds)
 *   step <name>       one attempt of a step, child of the workflow span, on the executor running it
 *   tool <tool>       the tool call (kind CLIENT), child of the step span; its traceparent goes
 *                     to the tool (an http.request header, MCP _meta)
 * Attributes: stepd.workflow.id, stepd.workflow.name, stepd.step.id, stepd.step.name,
 * stepd.step.attempt, stepd.tool, stepd.executor.id, stepd.outcome, stepd.error.code.
 */
import { randomBytes } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type Span, type SpanContext, type Tracer } from '@opentelemetry/api';
import type { Queryable } from '../db/queries/common.js';
import { getEndedWorkflowSpans } from '../db/queries/traces.js';
import type { Logger } from '../logger.js';
import type { SpanOutcome, StepSpanInfo, StepTrace, StepTracing } from './stepTracing.js';
import { traceparentOf, workflowTraceIds, type WorkflowTraceIds } from './workflowTraceIds.js';

/**
 * Random ids, except for the next span started after `pin`: that one gets the given trace and
 * span id (the SDK asks for both synchronously inside startSpan). One per TracerProvider.
 */
export class PinnedIdGenerator {
  private pinned: { traceId?: string; spanId?: string } = {};

  pin(ids: WorkflowTraceIds): void {
    this.pinned = { ...ids };
  }

  unpin(): void {
    this.pinned = {};
  }

  generateTraceId(): string {
    const id = this.pinned.traceId;
    this.pinned.traceId = undefined;
    return id ?? randomBytes(16).toString('hex');
  }

  generateSpanId(): string {
    const id = this.pinned.spanId;
    this.pinned.spanId = undefined;
    return id ?? randomBytes(8).toString('hex');
  }
}

export interface OtelTracingOptions {
  tracer: Tracer;
  /** The TracerProvider's id generator (so the workflow span gets its derived ids). */
  ids: PinnedIdGenerator;
  /** Identifies the database (see workflowTraceIds). */
  database: string;
  schema: string;
  executorId: string;
  log: Logger;
  /** Flushes and stops the provider. */
  shutdown: () => Promise<void>;
}

const NAME_MAX = 100;

export class OtelTracing implements StepTracing {
  readonly enabled = true;

  constructor(private readonly opts: OtelTracingOptions) {}

  /** The span context of a workflow's span, derived from its id (see workflowTraceIds). */
  private workflowSpanContext(workflowId: string): SpanContext {
    return { ...workflowTraceIds(this.opts.database, this.opts.schema, workflowId), traceFlags: TraceFlags.SAMPLED, isRemote: true };
  }

  startStep(info: StepSpanInfo): StepTrace {
    const parent = trace.setSpanContext(ROOT_CONTEXT, this.workflowSpanContext(info.workflowId));
    const attributes: Attributes = {
      'stepd.workflow.id': info.workflowId,
      'stepd.step.id': info.stepId,
      'stepd.step.name': info.stepName,
      'stepd.step.attempt': info.attempt,
      'stepd.executor.id': this.opts.executorId,
      ...(info.tool !== null ? { 'stepd.tool': info.tool } : {}),
    };
    const span = this.opts.tracer.startSpan(`step ${short(info.stepName)}`, { attributes }, parent);
    const tracer = this.opts.tracer;
    return {
      async toolCall<T>(tool: string, fn: (traceparent: string | undefined) => Promise<T>): Promise<T> {
        const toolSpan = tracer.startSpan(
          `tool ${short(tool)}`,
          { kind: SpanKind.CLIENT, attributes: { ...attributes, 'stepd.tool': tool } },
          trace.setSpan(ROOT_CONTEXT, span),
        );
        const ctx = toolSpan.spanContext();
        try {
          const result = await fn(toolSpan.isRecording() ? traceparentOf(ctx) : undefined);
          toolSpan.setStatus({ code: SpanStatusCode.OK });
          return result;
        } catch (err) {
          const e = err as { code?: unknown; message?: unknown };
          if (typeof e.code === 'string') toolSpan.setAttribute('stepd.error.code', e.code);
          toolSpan.setStatus({ code: SpanStatusCode.ERROR, message: String(e.message ?? err).slice(0, 500) });
          throw err;
        } finally {
          toolSpan.end();
        }
      },
      end(outcome: SpanOutcome): void {
        endWithOutcome(span, outcome);
      },
    };
  }

  workflowsEnded(db: Queryable, workflowIds: string[]): void {
    void this.recordWorkflows(db, workflowIds).catch((err: unknown) => this.opts.log.warn({ err, workflowIds }, 'could not record the trace spans of ended workflows'));
  }

  async shutdown(): Promise<void> {
    await this.opts.shutdown();
  }

  private async recordWorkflows(db: Queryable, workflowIds: string[]): Promise<void> {
    for (const row of await getEndedWorkflowSpans(db, workflowIds)) {
      const ids = workflowTraceIds(this.opts.database, this.opts.schema, row.id);
      let span: Span;
      this.opts.ids.pin(ids);
      try {
        span = this.opts.tracer.startSpan(
          `workflow ${short(row.name)}`,
          {
            root: true,
            startTime: row.started_at,
            attributes: {
              'stepd.workflow.id': row.id,
              'stepd.workflow.name': row.name,
              'stepd.workflow.status': row.status,
              'stepd.executor.id': this.opts.executorId,
              ...(row.parent_id !== null ? { 'stepd.workflow.parent_id': row.parent_id } : {}),
            },
            // A sub-workflow is a trace of its own, linked to its parent workflow's span.
            ...(row.parent_id !== null ? { links: [{ context: this.workflowSpanContext(row.parent_id) }] } : {}),
          },
          ROOT_CONTEXT,
        );
      } finally {
        this.opts.ids.unpin();
      }
      if (row.status === 'completed') span.setStatus({ code: SpanStatusCode.OK });
      else {
        if (row.error_code) span.setAttribute('stepd.error.code', row.error_code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: row.error_message ?? row.status });
      }
      span.end(row.ended_at ?? new Date());
    }
  }
}

function endWithOutcome(span: Span, outcome: SpanOutcome): void {
  if (outcome === undefined) span.setAttribute('stepd.outcome', 'none');
  else if (outcome.status === 'done') {
    span.setAttribute('stepd.outcome', 'done');
    span.setStatus({ code: SpanStatusCode.OK });
  } else {
    span.setAttribute('stepd.outcome', 'failed');
    if (outcome.error.code) span.setAttribute('stepd.error.code', outcome.error.code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (outcome.error.message ?? 'failed').slice(0, 500) });
  }
  span.end();
}

function short(name: string): string {
  return name.length > NAME_MAX ? `${name.slice(0, NAME_MAX)}…` : name;
}
