/**
 * The shape of flow JSON (DESIGN.md section 2), as a zod schema, and the reading of the
 * seed's flat form ({ "start": { "name": "first", ... }, "other": { ... } }) into the
 * canonical form ({ "start": "first", "steps": { "first": { ... }, "other": { ... } } }).
 */
import { withCapacityHint } from './capacityHint.js';
import { z } from 'zod';
import { MAX_JSON_DEPTH, measureJson, nameProblem } from './caps.js';
import { flowNameProblem } from './flowName.js';
import { completeSpec, forEachGuard, parallelSpec } from './forkSpec.js';

/** The largest flow accepted, as JSON text. */
export const MAX_FLOW_BYTES = 1024 * 1024;

/** Names that JavaScript objects treat specially; a step may not be called that. */
const RESERVED_STEP_NAMES: ReadonlySet<string> = new Set(['__proto__']);

const duration = z.union([z.string().min(1), z.number().int().nonnegative()]);
const stepName = z
  .string()
  .min(1, 'a step name must not be empty')
  .refine((name) => !RESERVED_STEP_NAMES.has(name), '"__proto__" cannot name a step')
  .superRefine((name, ctx) => {
    const problem = nameProblem(name);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const retrySpec = z
  .object({
    maxAttempts: z.number().int().min(1).max(1000).optional(),
    maxLost: z.number().int().min(1).max(1000).optional(),
    initial: duration.optional(),
    multiplier: z.number().min(1).max(100).optional(),
    max: duration.optional(),
    jitter: z.boolean().optional(),
  })
  .strict();

/** A JSON Schema: an object or a boolean (compiled and checked by jsonSchema.ts). */
const jsonSchemaSpec = z.union([z.boolean(), z.record(z.string(), z.unknown())]);

export const approvalSpec = z
  .object({
    timeout: duration.optional(),
    onTimeout: z.enum(['fail', 'approve', 'reject']).optional(),
    /** What the gate asks, a template rendered when it starts waiting. */
    message: z.string().min(1).optional(),
    /** JSON Schema the approver's data (the readying's result) must match. */
    schema: jsonSchemaSpec.optional(),
    /** Users who may approve or reject it (`*` matches any characters). */
    approvers: z.array(z.string().min(1)).min(1, 'approvers must name at least one user').optional(),
    /** Put single-use approve and reject URLs into the gate's notification (config `notify`, docs/operations.md). */
    links: z.boolean().optional(),
  })
  .strict();

/** A step that waits for a signal (DESIGN §2c): one name or several, an optional key template. */
export const signalSpec = z
  .object({
    name: z.union([z.string(), z.array(z.string())]),
    key: z.string().min(1, 'signal.key must not be empty; leave it out to match any key').optional(),
    since: z.enum(['workflow', 'step']).optional(),
    timeout: duration.optional(),
  })
  .strict();

export const forEachSpec = z
  .object({
    items: z.unknown().refine((v) => v !== undefined, 'forEach.items is required'),
    step: stepName,
    concurrency: z.number().int().min(1).max(10_000).optional(),
    as: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'forEach.as must be an identifier')
      .optional(),
  })
  .strict();

/** How a step ends the workflow: `done.error` is a message, or `{code, message}` for the workflow's error. */
export type DoneSpec = true | { status: 'completed' } | { status: 'failed'; error?: string | { code: string; message: string } };

const DONE_FORMS = 'true, {"status": "completed"} or {"status": "failed", "error": …}';
const DONE_ERROR_FORMS = 'a message (a non-empty string) or {"code": "…", "message": "…"}';

/** Checked by hand, not as a zod union, so each mistake gets a message that says what is expected. */
export const doneSpec = z.unknown().transform((v, ctx): DoneSpec => {
  const refuse = (message: string, path: string[] = []): never => {
    ctx.issues.push({ code: 'custom', message, input: v, path });
    return z.NEVER;
  };
  if (v === true) return true;
  if (!isPlainObject(v)) return refuse(`done must be ${DONE_FORMS} (got ${describeJson(v)})`);
  const extra = Object.keys(v).filter((k) => k !== 'status' && !(k === 'error' && v.status === 'failed'));
  if (v.status === 'completed' && extra.length === 0) return { status: 'completed' };
  if (v.status !== 'failed' && v.status !== 'completed') return refuse(`done.status must be "completed" or "failed" (got ${describeJson(v.status)})`, ['status']);
  if (extra.length > 0) return refuse(`done takes no "${extra[0]}"${v.status === 'completed' ? ' when it completes (an error goes with "status": "failed")' : ''}`, [extra[0]!]);
  const error = v.error;
  if (error === undefined) return { status: 'failed' };
  if (typeof error === 'string' && error.length > 0) return { status: 'failed', error };
  if (isPlainObject(error) && typeof error.code === 'string' && error.code && typeof error.message === 'string' && error.message && Object.keys(error).length === 2) {
    return { status: 'failed', error: { code: error.code, message: error.message } };
  }
  return refuse(`done.error must be ${DONE_ERROR_FORMS} (got ${describeJson(error)})`, ['error']);
});

function describeJson(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return `an object with ${Object.keys(v as object).length ? Object.keys(v as object).map((k) => `"${k}"`).join(', ') : 'no keys'}`;
  const text = JSON.stringify(v) ?? String(v);
  return `${typeof v} ${text.length > 40 ? `${text.slice(0, 40)}…` : text}`;
}

/** A sub-workflow step: start the registered flow `name` (latest or `version`) as a child with `input`. */
export const subWorkflowSpec = z
  .object({
    name: z
      .string()
      .min(1, 'workflow.name must name a registered flow')
      .superRefine((name, ctx) => {
        // The registry refuses look-alike names (flowName.ts): a step naming one starts nobody's flow, or a legacy impostor.
        const problem = flowNameProblem(name);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    version: z.number().int().min(1).optional(),
    input: z.unknown().optional(),
  })
  .strict();

export const stepSpec = z
  .object({
    name: stepName.optional(),
    description: z.string().optional(),
    tool: z.string().min(1).nullable().optional(),
    args: z.unknown().optional(),
    next: stepName.optional(),
    branch: z.array(z.object({ if: z.string().min(1), then: stepName }).strict()).min(1).optional(),
    default: stepName.optional(),
    parallel: parallelSpec.optional(),
    forEach: forEachGuard(forEachSpec).optional(),
    join: stepName.optional(),
    mode: z.enum(['failFast', 'allSettled']).optional(),
    /** Fork steps (§2d): when the join is created, whether live branches are then cancelled. */
    complete: completeSpec.optional(),
    cancelRemaining: z.boolean().optional(),
    done: doneSpec.optional(),
    output: z.unknown().optional(),
    approval: z.union([z.literal(true), approvalSpec]).optional(),
    wait: z.union([duration, z.object({ until: z.string().min(1) }).strict()]).optional(),
    workflow: subWorkflowSpec.optional(),
    signal: signalSpec.optional(),
    retry: retrySpec.optional(),
    timeout: duration.optional(),
    onError: stepName.optional(),
    /** `{ key, limit }` on a tool step (flow/capacity.ts), a number on a fork step (forkPolicy.ts): each checks its kind. */
    concurrency: z.unknown().optional(),
  })
  .strict();

export const flowSpec = z
  .object({
    start: stepName,
    description: z.string().optional(),
    timeout: duration.optional(),
    maxSteps: z.number().int().min(1).max(1_000_000).optional(),
    /** JSON Schema of the workflow input, checked at admission (`invalid_input`). */
    inputSchema: jsonSchemaSpec.optional(),
    /** Cost budget of one workflow (docs/ai-steps.md): no model call starts once its cost has reached `cost`. */
    budget: z.object({ cost: z.number().nonnegative().finite() }).strict().optional(),
    /** `{ key, limit }`: at most `limit` workflows of one key value at once (flow/capacity.ts). */
    concurrency: z.unknown().optional(),
    steps: z.record(stepName, stepSpec),
  })
  .strict();

export type StepSpec = z.infer<typeof stepSpec>;
export type FlowSpec = z.infer<typeof flowSpec>;

export interface FlowIssue {
  path: string;
  message: string;
}

/** Joins a zod issue path into `steps.search.branch[0].if` form. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Reads either form into the canonical one. The seed's flat form is recognised by `start`
 * being an object; its `name` says what the first step is called.
 */
export function normalizeFlow(raw: unknown): { flow?: unknown; issues: FlowIssue[]; flat?: true } {
  // A flow stored as JSON text (a jsonb string) is read once; text holding text again is refused.
  if (typeof raw === 'string') {
    const text = raw;
    try {
      raw = JSON.parse(text);
      if (typeof raw === 'string') return { issues: [{ path: '', message: 'flow must be a JSON object, but it is JSON text encoded twice' }] };
    } catch (err) {
      // Text that starts like a JSON object or array was meant as one; anything else is just a string.
      // The parser's message may quote half of a surrogate pair (an emoji): storableText cleans it later.
      if (/^\s*[[{]/.test(text)) return { issues: [{ path: '', message: `flow is JSON text that is not valid JSON: ${(err as Error).message}` }] };
      return { issues: [{ path: '', message: `flow must be a JSON object, but it is a string, not a flow: ${quoteStart(text)}` }] };
    }
  }
  const size = measureJson(raw, { maxBytes: MAX_FLOW_BYTES });
  if (size.over === 'depth') return { issues: [{ path: formatPath(deepPath(raw, MAX_JSON_DEPTH)), message: `flow nests deeper than ${MAX_JSON_DEPTH} levels` }] };
  if (size.over === 'bytes') return { issues: [{ path: '', message: `flow is larger than ${MAX_FLOW_BYTES} bytes as JSON` }] };
  if (!isPlainObject(raw)) return { issues: [{ path: '', message: 'flow must be a JSON object' }] };
  if (!isPlainObject(raw.start)) return { flow: raw, issues: [] };

  const start = raw.start;
  const name = start.name;
  if (typeof name !== 'string' || name.length === 0) {
    return { issues: [{ path: 'start.name', message: 'in the flat form, the "start" step must carry its "name"' }] };
  }
  if (RESERVED_STEP_NAMES.has(name)) return { issues: [{ path: 'start.name', message: `"${name}" cannot name a step` }] };
  const steps: Record<string, unknown> = {};
  const issues: FlowIssue[] = [];
  for (const [key, spec] of Object.entries(raw)) {
    if (key === 'start') continue;
    if (key === name) {
      issues.push({ path: key, message: `step "${name}" is defined twice: as "start" (by its name) and under its own key` });
      continue;
    }
    steps[key] = spec;
  }
  steps[name] = start;
  return { flow: { start: name, steps }, issues, flat: true };
}

/** The first 60 characters of `text` as JSON, cut between code points (never inside an emoji). */
function quoteStart(text: string): string {
  const points = Array.from(text);
  return points.length > 60 ? `${JSON.stringify(points.slice(0, 60).join(''))}…` : JSON.stringify(text);
}

/** The path to the first value nested deeper than `max` levels (recursion bounded by `max`). */
function deepPath(value: unknown, max: number): (string | number)[] {
  const path: (string | number)[] = [];
  const find = (v: unknown, depth: number): boolean => {
    if (typeof v !== 'object' || v === null) return false;
    if (depth >= max) return true;
    const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (const [key, child] of entries) {
      path.push(key);
      if (find(child, depth + 1)) return true;
      path.pop();
    }
    return false;
  };
  find(value, 0);
  return path;
}

/**
 * Parses shape only (zod); graph checks are in validate.ts. `maxSteps` (caps.flowSteps) is checked
 * before anything per step runs, so an oversized flow costs one count of its keys.
 */
export function parseFlowShape(raw: unknown, limits: { maxSteps?: number } = {}): { spec?: FlowSpec; issues: FlowIssue[]; flat?: true } {
  const normalized = normalizeFlow(raw);
  if (normalized.issues.length || normalized.flow === undefined) return { issues: normalized.issues };
  const steps = (normalized.flow as { steps?: unknown }).steps;
  if (isPlainObject(steps)) {
    const count = Object.keys(steps).length;
    if (limits.maxSteps !== undefined && count > limits.maxSteps) {
      return { issues: [{ path: 'steps', message: `the flow defines ${count} steps, above the operator's cap caps.flowSteps (${limits.maxSteps})` }] };
    }
    const reserved = Object.keys(steps).filter((k) => RESERVED_STEP_NAMES.has(k));
    if (reserved.length > 0) return { issues: reserved.map((k) => ({ path: `steps.${k}`, message: `"${k}" cannot name a step` })) };
    const badNames = Object.keys(steps).flatMap((k) => {
      const problem = nameProblem(k);
      return problem ? [{ path: `steps.${k.length > 40 ? `${k.slice(0, 40)}…` : k}`, message: problem }] : [];
    });
    if (badNames.length > 0) return { issues: badNames };
  }
  const parsed = flowSpec.safeParse(normalized.flow);
  if (!parsed.success) {
    return {
      issues: parsed.error.issues.map((i) => ({ path: formatPath(i.path), message: withCapacityHint(i.message) })),
    };
  }
  return { spec: parsed.data, issues: [], ...(normalized.flat ? { flat: true as const } : {}) };
}
