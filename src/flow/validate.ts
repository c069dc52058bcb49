/**
 * Validation of a flow: shape (zod, in spec.ts), then the graph. Every problem is reported as
 * {path, message}; a flow with no issues compiles into a CompiledFlow for the executor.
 */
import { compileCapacity } from './capacity.js';
import { compileCondition, ConditionEnvironments, type CompiledCondition } from './conditions.js';
import type { Caps } from './caps.js';
import {
  DEFAULT_FOREACH_CONCURRENCY,
  DEFAULT_MAX_STEPS,
  type CompiledFlow,
  type CompiledStep,
  type StepKind,
  type Transition,
} from './compiled.js';
import { compileApproval, compileRetryAndTimeout, compileWait, durationMs } from './stepPolicies.js';
import { SchemaCompiler } from './jsonSchema.js';
import { parseFlowShape, type FlowIssue, type FlowSpec, type StepSpec } from './spec.js';
import { templateRefs, type TemplateRef } from './templates.js';
import { checkRegions } from './regions.js';
import { subWorkflowShapeIssues } from './subWorkflow.js';
import { compileSignalWait } from './signalWait.js';
import { compileForkOptions, conditionSources, conditionStepRefs } from './forkPolicy.js';

export type { FlowIssue } from './spec.js';

const BASE_ROOTS = ['input', 'steps', 'workflow', 'item', 'index', 'results', 'completed', 'error', 'result'];
/** The seed's spellings of input, item and a step's result (templateExpression.ts reads them as those roots). */
const SEED_ROOT_ALIASES = ['workflow_input', 'loop_item', 'step'];

export type CompileResult = { ok: true; flow: CompiledFlow; issues: [] } | { ok: false; issues: FlowIssue[] };

export interface CompileOptions {
  /** The operator's caps: a flow asking for more is invalid; defaults are lowered to them. */
  caps?: Readonly<Caps>;
}

/** Validates any flow JSON (either form) and compiles it. */
export function compileFlow(raw: unknown, options: CompileOptions = {}): CompileResult {
  const shape = parseFlowShape(raw, { maxSteps: options.caps?.flowSteps });
  if (!shape.spec) return { ok: false, issues: shape.issues };
  const tooCostly = options.caps ? conditionBudgetProblem(shape.spec, options.caps) : undefined;
  if (tooCostly) return { ok: false, issues: [tooCostly] };
  const issues: FlowIssue[] = [];
  const flow = buildFlow(shape.spec, issues, shape.flat === true);
  if (options.caps) applyCaps(flow, options.caps, issues);
  if (issues.length === 0) issues.push(...checkRegions(flow));
  issues.push(...compileCapacity(flow));
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, flow, issues: [] };
}

/** All of a flow's conditions together: at most this many characters of CEL (compiling costs about 1 µs per character). */
export const MAX_FLOW_CONDITION_CHARS = 128 * 1024;

/**
 * What compiling the flow's conditions would cost, counted before any is parsed: at most
 * caps.flowSteps branch cases and {@link MAX_FLOW_CONDITION_CHARS} characters of CEL in all, so a
 * flow at the caps compiles in a fraction of a second however its conditions are spread.
 */
function conditionBudgetProblem(spec: FlowSpec, caps: Readonly<Caps>): FlowIssue | undefined {
  let cases = 0;
  let chars = 0;
  for (const step of Object.values(spec.steps)) {
    for (const source of conditionSources(step)) {
      cases++;
      chars += source.length;
    }
  }
  if (cases > caps.flowSteps) {
    return { path: 'steps', message: `the flow has ${cases} branch conditions, above the operator's cap caps.flowSteps (${caps.flowSteps}), which bounds conditions as it bounds steps` };
  }
  if (chars > MAX_FLOW_CONDITION_CHARS) {
    return { path: 'steps', message: `the flow's branch conditions have ${chars} characters in all, above the limit of ${MAX_FLOW_CONDITION_CHARS}` };
  }
  return undefined;
}

/** Just the issues: what `stepd validate` prints. */
export function validateFlow(raw: unknown, options: CompileOptions = {}): FlowIssue[] {
  return compileFlow(raw, options).issues;
}

/**
 * The caps a flow can be checked against before it runs: its step budget, each forEach's
 * concurrency and literal items. Defaults the flow left out are lowered to the caps instead.
 */
function applyCaps(flow: CompiledFlow, caps: Readonly<Caps>, issues: FlowIssue[]): void {
  flow.caps = caps;
  if (flow.spec.maxSteps === undefined) flow.maxSteps = Math.min(flow.maxSteps, caps.steps);
  else if (flow.spec.maxSteps > caps.steps) {
    issues.push({ path: 'maxSteps', message: `maxSteps ${flow.spec.maxSteps} is above the operator's cap caps.steps (${caps.steps})` });
  }
  for (const step of flow.steps.values()) {
    const t = step.transition;
    if (t.kind !== 'forEach') continue;
    const at = `steps.${step.name}.forEach`;
    const asked = step.spec.forEach?.concurrency;
    if (asked === undefined) t.concurrency = Math.min(t.concurrency, caps.forEachConcurrency);
    else if (asked > caps.forEachConcurrency) {
      issues.push({ path: `${at}.concurrency`, message: `concurrency ${asked} is above the operator's cap caps.forEachConcurrency (${caps.forEachConcurrency})` });
    }
    if (Array.isArray(t.items) && t.items.length > caps.forEachItems) {
      issues.push({ path: `${at}.items`, message: `${t.items.length} items are above the operator's cap caps.forEachItems (${caps.forEachItems})` });
    }
  }
}

/** `flatForm`: the seed's form, where a step without a tool is a gate; in the steps form only `approval` makes one. */
function buildFlow(spec: FlowSpec, issues: FlowIssue[], flatForm: boolean): CompiledFlow {
  const names = new Set(Object.keys(spec.steps));
  const aliases = new Set<string>();
  for (const [name, s] of Object.entries(spec.steps)) {
    const alias = s.forEach?.as;
    if (alias === undefined) continue;
    if (BASE_ROOTS.includes(alias) || SEED_ROOT_ALIASES.includes(alias)) {
      issues.push({ path: `steps.${name}.forEach.as`, message: `forEach alias "${alias}" shadows a built-in template root` });
    } else {
      aliases.add(alias);
    }
  }
  const roots = new Set([...BASE_ROOTS, ...aliases]);

  if (!names.has(spec.start)) {
    issues.push({ path: 'start', message: `start step "${spec.start}" is not defined in steps` });
  }
  const flow: CompiledFlow = {
    spec,
    start: spec.start,
    maxSteps: spec.maxSteps ?? DEFAULT_MAX_STEPS,
    steps: new Map(),
    itemAliases: [...aliases],
  };
  const timeoutMs = durationMs(spec.timeout, 'timeout', issues);
  if (timeoutMs !== undefined) flow.timeoutMs = timeoutMs;
  const schemas = new SchemaCompiler();
  if (spec.inputSchema !== undefined) {
    const c = schemas.compile(spec.inputSchema);
    if (c.ok) flow.inputSchema = c.check;
    else issues.push({ path: 'inputSchema', message: c.message });
  }

  // Built once per flow: a flow may name hundreds of aliases and thousands of conditions.
  const aliasList = [...aliases];
  const itemRoots = new Set(['item', 'index', ...aliasList]);
  const itemWords = new RegExp(`\\b(?:${[...itemRoots].join('|')})\\b`);
  const conditions = new ConditionEnvironments();
  for (const [name, step] of Object.entries(spec.steps)) {
    const compiled = buildStep(name, step, { names, roots, aliases: aliasList, issues, flatForm, schemas, conditions, itemRoots, itemWords });
    if (compiled) flow.steps.set(name, compiled);
  }
  return flow;
}

interface BuildContext {
  names: Set<string>;
  roots: Set<string>;
  aliases: string[];
  issues: FlowIssue[];
  flatForm: boolean;
  schemas: SchemaCompiler;
  /** CEL environments shared by the flow's conditions. */
  conditions: ConditionEnvironments;
  /** item, index and the forEach aliases; itemWords finds them in a condition. */
  itemRoots: ReadonlySet<string>;
  itemWords: RegExp;
}

function buildStep(name: string, s: StepSpec, ctx: BuildContext): CompiledStep | undefined {
  const at = `steps.${name}`;
  const { issues } = ctx;
  const before = issues.length;

  // normalizeFlow moved the flat form's start step under its name, so a mismatch is a mistake.
  if (s.name !== undefined && s.name !== name) {
    issues.push({ path: `${at}.name`, message: `name "${s.name}" does not match the step's key "${name}"` });
  }

  const refName = (target: string | undefined, path: string) => {
    if (target !== undefined && !ctx.names.has(target)) {
      issues.push({ path: `${at}.${path}`, message: `step "${target}" does not exist` });
    }
  };
  refName(s.next, 'next');
  s.branch?.forEach((b, i) => refName(b.then, `branch[${i}].then`));
  refName(s.default, 'default');
  refName(s.forEach?.step, 'forEach.step');
  refName(s.join, 'join');
  refName(s.onError, 'onError');

  const isFork = s.parallel !== undefined || s.forEach !== undefined;
  const transitions = [
    s.next !== undefined && 'next',
    s.branch !== undefined && 'branch',
    s.parallel !== undefined && 'parallel',
    s.forEach !== undefined && 'forEach',
    s.done !== undefined && 'done',
    s.join !== undefined && !isFork && 'join',
  ].filter((t): t is string => typeof t === 'string');
  if (transitions.length > 1) {
    issues.push({ path: at, message: `a step has at most one transition, but this one has ${transitions.join(', ')}` });
  }
  if (s.default !== undefined && s.branch === undefined) {
    issues.push({ path: `${at}.default`, message: '"default" only applies to a step with "branch"' });
  }
  if (s.mode !== undefined && !isFork) {
    issues.push({ path: `${at}.mode`, message: '"mode" only applies to a step with "parallel" or "forEach"' });
  }
  // A fan-out that starts or joins at itself would nest new instances of itself without end.
  if (s.forEach?.step === name) issues.push({ path: `${at}.forEach.step`, message: `a forEach cannot run itself ("${name}") for each item` });
  if (isFork && s.join === name) issues.push({ path: `${at}.join`, message: `a fan-out cannot join at itself ("${name}")` });

  const hasTool = typeof s.tool === 'string';
  const fork = compileForkOptions(name, s, isFork, hasTool, ctx, issues);
  if (hasTool && (s.tool as string).includes('{{')) {
    issues.push({
      path: `${at}.tool`,
      message: `step "${name}": tool names are not templates ("${s.tool}"); name the tool literally, and use a branch to choose between tools`,
    });
  }
  let kind: StepKind;
  const isSub = s.workflow !== undefined;
  if (hasTool) kind = 'tool';
  else if (isSub && !isFork) kind = 'workflow';
  else if (isFork) kind = 'fork';
  else if (s.signal !== undefined) kind = 'signal';
  else if (s.wait !== undefined) kind = 'timer';
  else if (s.approval !== undefined || ctx.flatForm) kind = 'gate';
  else kind = 'pass';
  if (hasTool && s.approval !== undefined) issues.push({ path: `${at}.approval`, message: 'a step cannot have both a tool and an approval' });
  if (hasTool && s.wait !== undefined) issues.push({ path: `${at}.wait`, message: 'a step cannot have both a tool and a wait' });
  if (s.wait !== undefined && (s.approval !== undefined || isFork)) {
    issues.push({ path: `${at}.wait`, message: 'a timer (wait) cannot also be an approval or a fan-out' });
  }
  if (isFork && !hasTool && s.approval !== undefined) {
    issues.push({ path: `${at}.approval`, message: 'an approval gate cannot also fan out; put the fan-out in the next step' });
  }
  if (isSub) issues.push(...subWorkflowShapeIssues(s, at, { hasTool, isFork }));
  const signal = compileSignalWait(s, at, { hasTool, isFork }, issues, (v, path) => durationMs(v, path, issues));
  if (!hasTool && s.args !== undefined && !(typeof s.args === 'object' && s.args !== null && Object.keys(s.args).length === 0)) {
    issues.push({ path: `${at}.args`, message: 'args only apply to a step with a tool' });
  }
  if ((kind === 'timer' || kind === 'fork' || kind === 'pass') && s.retry !== undefined) {
    issues.push({ path: `${at}.retry`, message: 'retry only applies to tool steps and gates' });
  }
  if (s.output !== undefined && s.done === undefined && transitions.length > 0 && !(transitions.length === 1 && transitions[0] === 'join')) {
    issues.push({ path: `${at}.output`, message: '"output" only applies to a step that ends the workflow' });
  }
  if (s.done !== undefined && s.done !== true && s.done.status === 'failed' && s.output !== undefined) {
    issues.push({ path: `${at}.output`, message: 'a step that fails the workflow has no output' });
  }

  // Policies.
  const { retry, timeoutMs } = compileRetryAndTimeout(s, at, issues);
  const approval = kind === 'gate' ? compileApproval(s, at, ctx.schemas, issues) : undefined;
  const wait = compileWait(s, at, issues);

  // Templates and conditions.
  const stepRefs = new Set<string>(fork.stepRefs);
  let usesItem = fork.usesItem;
  const { itemRoots } = ctx;
  const checkRefs = (value: unknown, path: string, allowResult: boolean) => {
    let refs: TemplateRef[];
    try {
      refs = templateRefs(value);
    } catch (err) {
      issues.push({ path: `${at}.${path}`, message: (err as Error).message });
      return;
    }
    for (const ref of refs) {
      noteRef(ref.root, ref.path, path, allowResult);
    }
  };
  const noteRef = (root: string, path: readonly (string | number)[], where: string, allowResult: boolean) => {
    if (!ctx.roots.has(root)) {
      issues.push({ path: `${at}.${where}`, message: `unknown template root "${root}" (known: ${[...ctx.roots].join(', ')})` });
      return;
    }
    if (root === 'result' && !allowResult) {
      issues.push({
        path: `${at}.${where}`,
        message: '"result" is this step\'s own result and is only available in output, conditions and forEach.items; use steps.NAME.result',
      });
    }
    if (root === 'results' && (where === 'output' || (where === 'forEach.items' && hasTool))) {
      issues.push({
        path: `${at}.${where}`,
        message:
          `step "${name}": "results" (the joined fan-out's results) is only available in the join step's args, not in its ${where}, ` +
          'which is resolved after the step ran; pass what it needs through the step\'s result (e.g. return it from the tool and use {{result}})',
      });
    }
    if (itemRoots.has(root)) usesItem = true;
    if (root === 'steps') {
      const target = path[0];
      if (typeof target !== 'string') {
        issues.push({ path: `${at}.${where}`, message: 'steps must be followed by a step name, as in steps.NAME.result' });
      } else if (!ctx.names.has(target)) {
        issues.push({ path: `${at}.${where}`, message: `template refers to step "${target}", which does not exist` });
      } else {
        stepRefs.add(target);
      }
    }
  };
  if (hasTool) checkRefs(s.args ?? {}, 'args', false);
  if (s.output !== undefined) checkRefs(s.output, 'output', true);
  if (s.forEach) {
    const items = s.forEach.items;
    const oneTemplate = typeof items === 'string' && items.startsWith('{{') && items.endsWith('}}') && items.indexOf('{{', 2) < 0;
    if (!Array.isArray(items) && !oneTemplate) {
      issues.push({ path: `${at}.forEach.items`, message: 'forEach.items must be an array or a single template such as "{{input.items}}"' });
    }
    checkRefs(items, 'forEach.items', hasTool);
  }
  if (wait && !('ms' in wait)) checkRefs('until' in wait ? wait.until : wait.duration, 'until' in wait ? 'wait.until' : 'wait', false);
  if (signal?.key !== undefined) checkRefs(signal.key, 'signal.key', false);
  if (kind === 'workflow') checkRefs(s.workflow?.input ?? {}, 'workflow.input', false);
  if (approval?.message !== undefined) checkRefs(approval.message, 'approval.message', false);

  const cases: { condition: CompiledCondition; then: string }[] = [];
  s.branch?.forEach((b, i) => {
    try {
      const condition = compileCondition(b.if, ctx.aliases, ctx.conditions);
      cases.push({ condition, then: b.then });
      for (const ref of conditionStepRefs(b.if)) {
        if (!ctx.names.has(ref)) issues.push({ path: `${at}.branch[${i}].if`, message: `condition refers to step "${ref}", which does not exist` });
        else stepRefs.add(ref);
      }
      if (ctx.itemWords.test(b.if)) usesItem = true;
    } catch (err) {
      issues.push({ path: `${at}.branch[${i}].if`, message: (err as Error).message });
    }
  });

  if (issues.length > before) return undefined;

  let transition: Transition;
  if (s.next !== undefined) transition = { kind: 'next', to: s.next };
  else if (s.branch !== undefined) transition = { kind: 'branch', cases, ...(s.default !== undefined ? { default: s.default } : {}) };
  else if (s.parallel !== undefined) {
    const { branches = [], conditions, policy, concurrency } = fork;
    transition = { kind: 'parallel', branches, mode: s.mode ?? 'failFast', policy, ...(conditions ? { conditions } : {}), ...(concurrency ? { concurrency } : {}), ...(s.join !== undefined ? { join: s.join } : {}) };
  } else if (s.forEach !== undefined) {
    transition = {
      kind: 'forEach',
      items: s.forEach.items,
      step: s.forEach.step,
      concurrency: s.forEach.concurrency ?? DEFAULT_FOREACH_CONCURRENCY,
      mode: s.mode ?? 'failFast',
      policy: fork.policy,
      ...(s.forEach.as !== undefined ? { as: s.forEach.as } : {}),
      ...(s.join !== undefined ? { join: s.join } : {}),
    };
  } else if (s.done !== undefined) {
    transition =
      s.done === true || s.done.status === 'completed'
        ? { kind: 'done', status: 'completed' }
        : { kind: 'done', status: 'failed', ...(s.done.error !== undefined ? { error: s.done.error } : {}) };
  } else transition = { kind: 'arrive', ...(s.join !== undefined ? { join: s.join } : {}) };

  const step: CompiledStep = {
    name,
    kind,
    spec: s,
    tool: hasTool ? (s.tool as string) : null,
    args: s.args ?? {},
    transition,
    retry,
    timeoutMs,
    stepRefs: [...stepRefs],
    usesItem,
  };
  if (s.onError !== undefined) step.onError = s.onError;
  if (approval) step.approval = approval;
  if (wait) step.wait = wait;
  if (signal && kind === 'signal') step.signal = signal;
  if (kind === 'workflow' && s.workflow) step.workflow = { name: s.workflow.name, version: s.workflow.version ?? null, input: s.workflow.input ?? {} };
  if (s.output !== undefined) step.output = s.output;
  return step;
}
