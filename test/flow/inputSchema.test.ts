import { describe, expect, it } from 'vitest';
import { inputSchemaProblem } from '../../src/flow/jsonSchema.js';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';

const withSchema = (inputSchema: unknown, approval?: unknown) => ({
  inputSchema,
  start: 'a',
  steps: { a: approval === undefined ? { tool: 'core.echo' } : { approval } },
});

const schema = {
  type: 'object',
  required: ['topic', 'limits'],
  additionalProperties: false,
  properties: {
    topic: { type: 'string', minLength: 3 },
    email: { type: 'string', format: 'email' },
    limits: { type: 'object', properties: { max: { type: 'integer', maximum: 10 } } },
    tags: { type: 'array', items: { type: 'string' } },
  },
};

describe('inputSchema', () => {
  it('reports every issue of an input with its path', () => {
    const compiled = compileFlow(withSchema(schema));
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    const problem = inputSchemaProblem(compiled.flow.inputSchema, { topic: 'ab', email: 'nope', limits: { max: 11 }, tags: ['x', 2], extra: 1 });
    expect(problem?.code).toBe('invalid_input');
    expect(problem!.issues).toEqual(
      expect.arrayContaining([
        { path: 'input.topic', message: 'must NOT have fewer than 3 characters' },
        { path: 'input.email', message: 'must match format "email"' },
        { path: 'input.limits.max', message: 'must be <= 10' },
        { path: 'input.tags[1]', message: 'must be string' },
        { path: 'input.extra', message: 'is not allowed here (additionalProperties)' },
      ]),
    );
    expect(inputSchemaProblem(compiled.flow.inputSchema, { limits: {} })!.issues).toEqual([{ path: 'input.topic', message: 'is required' }]);
    expect(inputSchemaProblem(compiled.flow.inputSchema, { topic: 'abc', limits: { max: 3 } })).toBeUndefined();
  });

  it('a schema ajv cannot compile, or an unknown keyword, is a validation issue at its path', () => {
    expect(validateFlow(withSchema({ type: 'strnig' }))).toEqual([{ path: 'inputSchema', message: expect.stringContaining('not a valid JSON Schema') }]);
    expect(validateFlow(withSchema({ type: 'object', requird: ['x'] }))).toEqual([{ path: 'inputSchema', message: expect.stringContaining('requird') }]);
    expect(validateFlow(withSchema(['x']))[0]!.path).toBe('inputSchema');
    expect(validateFlow(withSchema(true, { schema: { minimum: 'three' } }))).toEqual([{ path: 'steps.a.approval.schema', message: expect.stringContaining('not a valid JSON Schema') }]);
  });

  it('runs patterns on RE2: a catastrophic pattern checks in linear time, and lookaround is refused', () => {
    const compiled = compileFlow(withSchema({ type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } }));
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    const problem = inputSchemaProblem(compiled.flow.inputSchema, { s: `${'a'.repeat(5_000)}!` });
    expect(problem!.issues).toEqual([{ path: 'input.s', message: 'must match pattern "^(a+)+$"' }]);
    expect(validateFlow(withSchema({ type: 'string', pattern: '(?=a)' }))[0]!.path).toBe('inputSchema');
  });

  it('accepts the 2020-12 draft when $schema names it', () => {
    const s = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { n: { type: 'number' }, pair: { type: 'array', prefixItems: [{ type: 'string' }] } } };
    expect(validateFlow(withSchema(s))).toEqual([]);
  });
});
