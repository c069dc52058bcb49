/** The literal parts of a step's arguments against a tool's input schema; templated values are left to run time. */
import { describe, expect, it } from 'vitest';
import { ArgumentChecker } from '../../src/tools/argumentChecker.js';

const check = (schema: unknown, args: unknown) => new ArgumentChecker().check({ tool: 'kb.search', schema, args, at: 'steps.s.args' });

describe('ArgumentChecker', () => {
  const schema = {
    type: 'object',
    properties: {
      q: { type: 'string', minLength: 2 },
      limit: { anyOf: [{ type: 'integer', minimum: 1 }, { type: 'null' }] },
      tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
      mode: { enum: ['fast', 'deep'] },
    },
    required: ['q'],
    additionalProperties: false,
  };

  it('reports each literal mistake at its path in the flow', () => {
    expect(check(schema, { q: 'x', limit: 0, tags: ['a', 3], mode: 'slow', extra: true }).issues).toEqual([
      { path: 'steps.s.args.extra', message: 'kb.search takes no argument "extra" (input schema of kb.search)' },
      { path: 'steps.s.args.q', message: 'must NOT have fewer than 2 characters (input schema of kb.search)' },
      { path: 'steps.s.args.limit', message: 'matches none of the forms it may take (input schema of kb.search)' },
      { path: 'steps.s.args.tags[1]', message: 'must be string (input schema of kb.search)' },
      { path: 'steps.s.args.mode', message: 'must be one of ["fast","deep"] (input schema of kb.search)' },
    ]);
  });

  it('judges nothing that depends on a templated value, but still what only needs the keys or the length', () => {
    expect(check(schema, { q: '{{input.q}}', limit: '{{input.limit}}', tags: ['{{input.tag}}', 'b'], mode: '{{input.mode}}' }).issues).toEqual([]);
    expect(check(schema, { q: 'https://{{input.host}}' }).issues).toEqual([]);
    expect(check(schema, { limit: 5, tags: ['{{input.tag}}'] }).issues).toEqual([
      { path: 'steps.s.args', message: 'missing argument "q", which kb.search requires' },
      { path: 'steps.s.args.tags', message: 'must NOT have fewer than 2 items (input schema of kb.search)' },
    ]);
    expect(check(schema, '{{input.args}}').issues).toEqual([]);
  });

  it('reads draft 2020-12 schemas by their $schema, and absent arguments as {}', () => {
    const tuple = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { at: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }] } }, required: ['at'] };
    expect(check(tuple, { at: [1, 'x'] }).issues).toEqual([{ path: 'steps.s.args.at[1]', message: 'must be number (input schema of kb.search)' }]);
    expect(check(tuple, undefined).issues).toEqual([{ path: 'steps.s.args', message: 'missing argument "at", which kb.search requires' }]);
  });

  it('a schema it cannot compile is a warning, not an issue', () => {
    const result = check({ type: 'object', properties: { a: { $ref: '#/nowhere' } } }, { a: 1 });
    expect(result.issues).toEqual([]);
    expect(result.warnings).toEqual([{ path: 'steps.s.args', message: expect.stringMatching(/^the input schema of kb\.search could not be read \(.+\); its arguments were not checked$/) }]);
  });
});
