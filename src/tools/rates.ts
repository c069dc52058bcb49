/**
 * Rate limits (config `limits.rates`): token buckets per tool pattern, optionally one per user or
 * per concurrency key, kept in the database (sql/0028 `rate_buckets`) so they hold exactly across
 * every executor. This module is the pure part: reading `"50/s"` or `{ rate, per, burst }` and
 * naming the buckets a step takes a token from (written on its row as `rate_keys`).
 */
import { z } from 'zod';
import { matchesToolPattern } from './matchesToolPattern.js';

const RATE_TEXT = /^\s*(\d+)\s*\/\s*(\d*)\s*(ms|s|m|h)\s*$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** `"60/m"`: 60 tokens a minute. Also `"5/10s"`. Returns the count per period, or an error message. */
export function parseRate(text: string): { count: number; periodMs: number } | { error: string } {
  const m = RATE_TEXT.exec(text);
  if (!m) return { error: `rate "${text}" must look like "50/s", "60/m", "1000/h" or "5/10s" (a whole number of steps per period)` };
  const count = Number(m[1]);
  const periodMs = (m[2] === '' ? 1 : Number(m[2])) * UNIT_MS[m[3]!]!;
  if (!Number.isInteger(count) || count < 1 || count > 1_000_000) return { error: `rate "${text}" must allow a whole number of steps from 1 to 1000000 per period` };
  if (!Number.isInteger(periodMs) || periodMs < 1) return { error: `rate "${text}" must have a period of at least 1 ms` };
  return { count, periodMs };
}

const rateText = z.string().superRefine((v, ctx) => {
  const r = parseRate(v);
  if ('error' in r) ctx.addIssue({ code: 'custom', message: r.error });
});

/** One entry of `limits.rates`: `"50/s"`, or `{ "rate": "60/m", "per": "user" | "key", "burst": 1 }`. */
export const rateSpecSchema = z.union([
  rateText,
  z.strictObject({
    rate: rateText,
    per: z.enum(['user', 'key']).optional(),
    /**
     * Steps that may start together (default 1: spread evenly, one per period / count). The period
     * is cut into windows of `burst` tokens each; a window's unused tokens are not carried over.
     */
    burst: z.number().int().min(1).max(1_000_000).optional(),
  }),
]);

export type RateSpec = z.infer<typeof rateSpecSchema>;

interface Rate {
  pattern: string;
  count: number;
  periodMs: number;
  burst: number;
  per: 'user' | 'key' | undefined;
}

export interface RatePolicy {
  /** Whether any rate is configured. */
  readonly any: boolean;
  /** The buckets a step calling `tool` as `user` under key `key` takes a token from ('COUNT|PERIOD_MS|BURST|NAME'). */
  bucketsFor(tool: string, user: string | null, key: string | undefined): string[];
}

/** The separator inside a bucket's name (a tool pattern never holds it). */
const SEP = '\u001f';

export function ratePolicy(rates: Record<string, RateSpec> | undefined): RatePolicy {
  const list: Rate[] = Object.entries(rates ?? {}).map(([pattern, spec]) => {
    const text = typeof spec === 'string' ? spec : spec.rate;
    const parsed = parseRate(text);
    if ('error' in parsed) throw new Error(parsed.error);
    return {
      pattern,
      count: parsed.count,
      periodMs: parsed.periodMs,
      burst: Math.min(parsed.count, typeof spec === 'string' ? 1 : (spec.burst ?? 1)),
      per: typeof spec === 'string' ? undefined : spec.per,
    };
  });
  return {
    any: list.length > 0,
    bucketsFor(tool, user, key) {
      const out: string[] = [];
      for (const r of list) {
        if (!matchesToolPattern(r.pattern, tool)) continue;
        const name = r.per === 'user' ? `${r.pattern}${SEP}user${SEP}${user ?? ''}` : r.per === 'key' ? `${r.pattern}${SEP}key${SEP}${key ?? ''}` : r.pattern;
        out.push(`${r.count}|${r.periodMs}|${r.burst}|${name}`);
      }
      return out;
    },
  };
}

/** A bucket name as /metrics shows it: `llm.*`, `llm.* user=james`, `llm.* key=acct-1`. */
export function bucketLabel(name: string): string {
  const [pattern, per, value] = name.split(SEP);
  return per === undefined ? pattern! : `${pattern} ${per}=${value ?? ''}`;
}
