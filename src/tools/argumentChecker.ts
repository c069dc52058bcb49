/**
 * Checks the literal parts of a step's arguments against a tool's published input schema (JSON
 * Schema, checked with ajv), for `stepd validate`. Templated values (`"{{input.url}}"`,
 * `"https://{{input.host}}/x"`) are only known at run time, so nothing about them is judged:
 * an error at, under or (for a keyword that reads the values) above a templated value is dropped.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { valuePath } from '../flow/jsonSchema.js';
import type { FlowIssue } from '../flow/spec.js';

type AnyAjv = Ajv | Ajv2019 | Ajv2020;

/** Keywords on an object or array that only read its keys or length, so a templated member cannot change their verdict. */
const SHAPE_KEYWORDS: ReadonlySet<string> = new Set([
  'type',
  'required',
  'additionalProperties',
  'propertyNames',
  'minProperties',
  'maxProperties',
  'minItems',
  'maxItems',
  'dependentRequired',
  'dependencies',
]);

/** ajv-formats is CommonJS: its default export arrives as the module object under some loaders. */
const addFormats = ((ajvFormats as unknown as { default?: unknown }).default ?? ajvFormats) as (ajv: AnyAjv) => unknown;

export interface ArgumentCheck {
  /** The tool's full name (`kb.search`), for the messages. */
  tool: string;
  schema: unknown;
  args: unknown;
  /** Where the arguments sit in the flow: `steps.fetch.args`. */
  at: string;
}

/** One per `stepd validate` run: compiled schemas are kept per tool. */
export class ArgumentChecker {
  readonly #ajv = new Map<string, AnyAjv>();
  readonly #compiled = new Map<unknown, ValidateFunction | Error>();

  /** Issues with the literal arguments; a schema ajv cannot compile is reported as a warning instead. */
  check(c: ArgumentCheck): { issues: FlowIssue[]; warnings: FlowIssue[] } {
    const args = c.args === undefined || c.args === null ? {} : c.args;
    if (typeof args === 'string' && isTemplated(args)) return { issues: [], warnings: [] };
    if (typeof c.schema !== 'object' || c.schema === null) return { issues: [], warnings: [] };
    const validate = this.#compile(c.schema);
    if (validate instanceof Error) {
      return { issues: [], warnings: [{ path: c.at, message: `the input schema of ${c.tool} could not be read (${validate.message}); its arguments were not checked` }] };
    }
    if (validate(args)) return { issues: [], warnings: [] };
    const templated = templatedPointers(args);
    const errors = validate.errors ?? [];
    // An anyOf / oneOf that failed is one issue, not one per alternative it tried.
    const alternatives = errors.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf').map((e) => `${e.schemaPath}/`);
    const issues: FlowIssue[] = [];
    const seen = new Set<string>();
    for (const e of errors) {
      if (dependsOnTemplate(e, templated) || alternatives.some((p) => e.schemaPath.startsWith(p))) continue;
      const issue = toIssue(e, c);
      const key = `${issue.path}\n${issue.message}`;
      if (!seen.has(key)) {
        seen.add(key);
        issues.push(issue);
      }
    }
    return { issues, warnings: [] };
  }

  #compile(schema: object): ValidateFunction | Error {
    const cached = this.#compiled.get(schema);
    if (cached) return cached;
    let result: ValidateFunction | Error;
    try {
      result = this.#ajvFor(schema).compile(schema);
    } catch (err) {
      result = err instanceof Error ? err : new Error(String(err));
    }
    this.#compiled.set(schema, result);
    return result;
  }

  /** The ajv for the schema's `$schema` draft (draft-07 when it names none). */
  #ajvFor(schema: object): AnyAjv {
    const declared = (schema as { $schema?: unknown }).$schema;
    const draft = typeof declared === 'string' && declared.includes('2020-12') ? '2020' : typeof declared === 'string' && declared.includes('2019-09') ? '2019' : '07';
    let ajv = this.#ajv.get(draft);
    if (!ajv) {
      // Servers' schemas are not ours: unknown keywords and formats are let through, not refused.
      const options = { allErrors: true, strict: false, validateFormats: true, logger: false } as const;
      ajv = draft === '2020' ? new Ajv2020(options) : draft === '2019' ? new Ajv2019(options) : new Ajv(options);
      addFormats(ajv);
      this.#ajv.set(draft, ajv);
    }
    return ajv;
  }
}

function isTemplated(value: string): boolean {
  return value.includes('{{');
}

/** JSON pointers (`/url`, `/items/0`) of every string that holds a template. */
function templatedPointers(value: unknown, pointer = '', out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (isTemplated(value)) out.push(pointer);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => templatedPointers(v, `${pointer}/${i}`, out));
  } else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) templatedPointers(v, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, out);
  }
  return out;
}

function dependsOnTemplate(e: ErrorObject, templated: readonly string[]): boolean {
  for (const t of templated) {
    if (e.instancePath === t || e.instancePath.startsWith(`${t}/`)) return true;
    if (t.startsWith(`${e.instancePath}/`) && !SHAPE_KEYWORDS.has(e.keyword)) return true;
  }
  return false;
}

function toIssue(e: ErrorObject, c: ArgumentCheck): FlowIssue {
  const params = e.params as Record<string, unknown>;
  const against = `(input schema of ${c.tool})`;
  if (e.keyword === 'required') {
    return { path: valuePath(c.at, e.instancePath), message: `missing argument "${String(params.missingProperty)}", which ${c.tool} requires` };
  }
  if (e.keyword === 'additionalProperties') {
    return { path: valuePath(c.at, `${e.instancePath}/${String(params.additionalProperty)}`), message: `${c.tool} takes no argument "${String(params.additionalProperty)}" ${against}` };
  }
  if (e.keyword === 'anyOf' || e.keyword === 'oneOf') {
    return { path: valuePath(c.at, e.instancePath), message: `matches none of the forms it may take ${against}` };
  }
  if (e.keyword === 'enum') {
    return { path: valuePath(c.at, e.instancePath), message: `must be one of ${JSON.stringify(params.allowedValues)} ${against}` };
  }
  return { path: valuePath(c.at, e.instancePath), message: `${e.message ?? 'does not match'} ${against}` };
}
