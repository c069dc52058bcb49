/** The function-tool shape shared by the library and the worker SDK: names, zod parsing, progress. Pure. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { StepError } from '../../src/errors.js';
import { checkFunctionTools, normalizeProgress, parseToolArgs } from '../../src/tools/functionTool.js';
import { isTransient } from '../../src/worker/transient.js';

describe('function tools', () => {
  it('parses arguments with the schema (defaults applied) and refuses bad ones with bad_args, not retryable, naming each issue', () => {
    const tool = { input: z.object({ cents: z.number().int(), currency: z.string().default('EUR') }), run: () => null };
    expect(parseToolArgs('billing.charge', tool, { cents: 5 })).toEqual({ cents: 5, currency: 'EUR' });
    let err: unknown;
    try {
      parseToolArgs('billing.charge', tool, { cents: 'five' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StepError);
    expect(err).toMatchObject({ code: 'bad_args', retryable: false, details: { tool: 'billing.charge', issues: [{ path: 'cents' }] } });
    expect((err as Error).message).toMatch(/^billing\.charge: bad arguments: cents: /);
    // No schema: the arguments as they are.
    expect(parseToolArgs('a.b', { run: () => null }, { any: 1 })).toEqual({ any: 1 });
  });

  it('checks names and shapes up front, all problems at once', () => {
    expect(() => checkFunctionTools({ 'billing.charge': { run: () => 1 }, 'mail.send.v2': { run: () => 1 } }, 'tools')).not.toThrow();
    expect(() => checkFunctionTools({ charge: { run: () => 1 }, 'a.b': { run: 1 as never }, 'c.d': { input: {} as never, run: () => 1 } }, 'tools')).toThrow(
      /"charge": a tool name is "prefix.tool".*"a.b": needs a run.*"c.d": input must be a schema/,
    );
  });

  it('normalizes progress: a number, or {progress, total?, message?}; anything else is dropped', () => {
    expect(normalizeProgress(3)).toEqual({ progress: 3 });
    expect(normalizeProgress({ progress: 1, total: 4, message: 'm', extra: 1 } as never)).toEqual({ progress: 1, total: 4, message: 'm' });
    expect(normalizeProgress({ progress: Number.NaN })).toBeUndefined();
    expect(normalizeProgress('x' as never)).toBeUndefined();
  });

  it('tells a transient failure of a contract call (retry) from the database\'s answer (final)', () => {
    expect(isTransient(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isTransient(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransient(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(isTransient(Object.assign(new Error('deadlock'), { code: '40P01' }))).toBe(true);
    expect(isTransient(Object.assign(new Error('stepd: stale task token'), { code: '55000' }))).toBe(false);
    expect(isTransient(Object.assign(new Error('bad'), { code: '22023' }))).toBe(false);
  });
});
