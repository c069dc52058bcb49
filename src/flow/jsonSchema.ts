/**
 * JSON Schema in flows (`inputSchema`, a gate's `approval.schema`): compiled when the flow is
 * validated (a schema ajv cannot compile is a validation issue) and checked against a value at
 * run time, every problem as {path, message}.
 *
 * ajv compiles a schema to a JavaScript function (its documented way of working: the schema is
 * data, never code, but the validator is generated). `pattern` and `patternProperties` run on RE2
 * (re2js: linear time, no backreferences or lookaround), so a schema written by a client cannot
 * stall the executor with a catastrophic regular expression. The draft is the one `$schema`
 * names (2020-12, 2019-09), else draft-07. No module state: one ajv per compiled flow.
 */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { RE2JS } from 're2js';
import type { FlowIssue } from './spec.js';

type AnyAjv = Ajv | Ajv2019 | Ajv2020;

/** ajv-formats is CommonJS: its default export arrives as the module object under some loaders. */
const addFormats = ((ajvFormats as unknown as { default?: unknown }).default ?? ajvFormats) as (ajv: AnyAjv) => unknown;

/** A compiled schema: `check` returns every issue of a value, each path starting at `root`. */
export interface SchemaCheck {
  /** The schema as written in the flow (shown to approvers, e.g. by `stepd status`). */
  schema: unknown;
  check(value: unknown, root: string): FlowIssue[];
}

/** ajv's regular-expression engine option, on RE2. */
function re2Engine(): NonNullable<NonNullable<Options['code']>['regExp']> {
  const engine = (pattern: string) => {
    const re = RE2JS.compile(pattern);
    return { test: (text: string) => re.matcher(text).find() };
  };
  // Only used by ajv's standalone code generation, which stepd does not use.
  return Object.assign(engine, { code: 'require("re2js").RE2JS.compile' });
}

/** One ajv per draft for one flow: schemas of the same flow share it. */
export class SchemaCompiler {
  readonly #ajv = new Map<string, AnyAjv>();

  /** Compiles `schema` (an object or a boolean); a message when ajv cannot. */
  compile(schema: unknown): { ok: true; check: SchemaCheck } | { ok: false; message: string } {
    if (typeof schema !== 'boolean' && (typeof schema !== 'object' || schema === null || Array.isArray(schema))) {
      return { ok: false, message: 'a JSON Schema must be an object (or true / false)' };
    }
    let validate: ValidateFunction;
    try {
      validate = this.#ajvFor(schema).compile(schema as object | boolean);
    } catch (err) {
      return { ok: false, message: `not a valid JSON Schema: ${(err as Error).message}` };
    }
    return {
      ok: true,
      check: {
        schema,
        check: (value, root) => (validate(value) ? [] : issuesOf(validate.errors ?? [], root)),
      },
    };
  }

  #ajvFor(schema: unknown): AnyAjv {
    const declared = typeof schema === 'object' && schema !== null ? (schema as { $schema?: unknown }).$schema : undefined;
    const draft = typeof declared === 'string' && declared.includes('2020-12') ? '2020' : typeof declared === 'string' && declared.includes('2019-09') ? '2019' : '07';
    let ajv = this.#ajv.get(draft);
    if (!ajv) {
      // Unknown keywords are refused (a typo would otherwise check nothing); types need not be spelled out.
      const options: Options = {
        allErrors: true,
        strictSchema: true,
        strictNumbers: true,
        strictTypes: false,
        strictTuples: false,
        strictRequired: false,
        validateFormats: true,
        logger: false,
        code: { regExp: re2Engine() },
      };
      ajv = draft === '2020' ? new Ajv2020(options) : draft === '2019' ? new Ajv2019(options) : new Ajv(options);
      addFormats(ajv);
      this.#ajv.set(draft, ajv);
    }
    return ajv;
  }
}

/** At most this many issues are reported for one value. */
const MAX_ISSUES = 50;

function issuesOf(errors: ErrorObject[], root: string): FlowIssue[] {
  const out: FlowIssue[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const issue = toIssue(e, root);
    const key = `${issue.path}\n${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(issue);
    if (out.length >= MAX_ISSUES) break;
  }
  return out;
}

function toIssue(e: ErrorObject, root: string): FlowIssue {
  const params = e.params as Record<string, unknown>;
  if (e.keyword === 'required') return { path: valuePath(root, `${e.instancePath}/${escape(String(params.missingProperty))}`), message: 'is required' };
  if (e.keyword === 'additionalProperties') {
    return { path: valuePath(root, `${e.instancePath}/${escape(String(params.additionalProperty))}`), message: 'is not allowed here (additionalProperties)' };
  }
  if (e.keyword === 'enum') return { path: valuePath(root, e.instancePath), message: `must be one of ${JSON.stringify(params.allowedValues)}` };
  return { path: valuePath(root, e.instancePath), message: e.message ?? 'does not match the schema' };
}

function escape(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** `/address/zip`, `/items/0` → `input.address.zip`, `input.items[0]`; odd keys quoted. */
export function valuePath(root: string, pointer: string): string {
  let out = root;
  if (!pointer) return out;
  for (const raw of pointer.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(part)) out += `.${part}`;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}

/**
 * The input against the flow's `inputSchema`: `invalid_input` with every issue and its path
 * (`input.address.zip`), or undefined when it matches (or the flow declares none).
 */
export function inputSchemaProblem(inputSchema: SchemaCheck | undefined, input: unknown): { code: 'invalid_input'; message: string; issues: FlowIssue[]; retryable: false } | undefined {
  if (!inputSchema) return undefined;
  const issues = inputSchema.check(input ?? {}, 'input');
  if (issues.length === 0) return undefined;
  const first = issues[0]!;
  return {
    code: 'invalid_input',
    message: `the input does not match the flow's inputSchema (${issues.length} issue(s)); first: ${first.path}: ${first.message}`,
    issues,
    retryable: false,
  };
}
