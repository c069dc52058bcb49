/**
 * The shape of a fork step's options (DESIGN §2d): `parallel` entries (a step name, or
 * `{ "if": COND, "then": NAME }`), `complete`, `cancelRemaining` and `concurrency`. Checked by
 * hand where a zod union would only say "invalid input", so each mistake says what is expected.
 */
import { z } from 'zod';

export type ParallelEntry = string | { if: string; then: string };
export type CompleteSpec = 'all' | 'first' | { atLeast: number } | { when: string };

const ENTRY_FORMS = 'a step name or {"if": CONDITION, "then": "step"}';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `parallel`: a list of entries. A template in its place is refused with a pointer to forEach. */
export const parallelSpec = z.unknown().transform((v, ctx): ParallelEntry[] => {
  const refuse = (message: string, path: (string | number)[] = []): never => {
    ctx.issues.push({ code: 'custom', message, input: v, path });
    return z.NEVER;
  };
  if (typeof v === 'string' && v.includes('{{')) {
    return refuse(
      `parallel lists the branches by name and cannot be a template (${JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v)}); ` +
        'to fan out over a list computed at run time use "forEach": { "items": "{{…}}", "step": … }, ' +
        'and to start only some branches use entries {"if": CONDITION, "then": "step"}',
    );
  }
  if (!Array.isArray(v)) return refuse(`parallel must be a list of branches, each ${ENTRY_FORMS}`);
  const out: ParallelEntry[] = [];
  v.forEach((e, i) => {
    if (typeof e === 'string') {
      if (e.includes('{{')) refuse(`a parallel branch is a step name, not a template (${JSON.stringify(e)}); use {"if": CONDITION, "then": "step"} to start it only sometimes`, [i]);
      else if (e.length === 0) refuse('a step name must not be empty', [i]);
      else out.push(e);
      return;
    }
    if (isObject(e) && typeof e.if === 'string' && e.if.trim() !== '' && typeof e.then === 'string' && e.then !== '' && Object.keys(e).length === 2) {
      out.push({ if: e.if, then: e.then });
      return;
    }
    refuse(`each parallel branch is ${ENTRY_FORMS}`, [i]);
  });
  return out;
});

/** `complete`: when a fork's join is created. */
export const completeSpec = z.unknown().transform((v, ctx): CompleteSpec => {
  const refuse = (message: string): never => {
    ctx.issues.push({ code: 'custom', message, input: v, path: [] });
    return z.NEVER;
  };
  if (v === 'all' || v === 'first') return v;
  if (isObject(v) && Object.keys(v).length === 1) {
    if ('atLeast' in v) {
      const n = v.atLeast;
      if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 1_000_000) return { atLeast: n };
      return refuse(`complete.atLeast must be a whole number of branches, at least 1 (got ${JSON.stringify(n)})`);
    }
    if ('when' in v) {
      if (typeof v.when === 'string' && v.when.trim() !== '') return { when: v.when };
      return refuse('complete.when must be a condition (CEL over results and completed)');
    }
  }
  return refuse('complete must be "all", "first", {"atLeast": N} or {"when": CONDITION}');
});

/**
 * `forEach` given as a template (`"forEach": "{{input.items}}"`) instead of its object: said
 * plainly, with the form it takes; anything else goes on to the object's own schema.
 */
export function forEachGuard<T extends z.ZodType>(inner: T) {
  return z
    .unknown()
    .superRefine((v, ctx) => {
      if (typeof v === 'string' || Array.isArray(v)) {
        ctx.addIssue({
          code: 'custom',
          message: `forEach is an object naming the items and the step to run for each: { "items": ${typeof v === 'string' ? JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v) : '[…]'}, "step": "NAME" }`,
        });
      }
    })
    .pipe(inner);
}
