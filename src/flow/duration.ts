/**
 * Durations in flow JSON: a number of milliseconds, or a string such as "500ms", "2s", "1.5s",
 * "5m", "24h", "7d" or a compound "1h30m". Pure.
 */

const UNIT_MS: Readonly<Record<string, number>> = Object.freeze({ ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 });

/** Largest unit first: a compound duration names each unit at most once, in this order. */
const UNIT_ORDER: readonly string[] = ['d', 'h', 'm', 's', 'ms'];

/** One `<number><unit>` part. Compiled per call with the sticky flag (a sticky RegExp has state). */
const PART_SOURCE = String.raw`(\d+(?:\.\d+)?)(ms|s|m|h|d)`;

const EXAMPLES = '"500ms", "2s", "1.5s", "5m", "24h", "7d" or "1h30m"';

/**
 * Converts a duration to milliseconds (rounded to a whole millisecond). Numbers are taken as
 * milliseconds. Throws an Error with a readable message for anything else, including negative
 * values.
 */
export function parseDuration(value: string | number): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`invalid duration ${value}: not a finite number of milliseconds`);
    if (value < 0) throw new Error(`invalid duration ${value}: durations cannot be negative`);
    return Math.round(value);
  }
  if (typeof value !== 'string') throw new Error(`invalid duration ${JSON.stringify(value)}: expected a string like ${EXAMPLES} or a number of milliseconds`);

  const text = value.trim();
  if (text.startsWith('-')) throw new Error(`invalid duration "${value}": durations cannot be negative`);
  if (text === '') throw new Error(`invalid duration "${value}": expected a string like ${EXAMPLES}`);

  const pattern = new RegExp(PART_SOURCE, 'y');
  let total = 0;
  let pos = 0;
  let lastRank = -1;
  while (pos < text.length) {
    pattern.lastIndex = pos;
    const match = pattern.exec(text);
    if (!match) {
      const hint = /^\d+(\.\d+)?$/.test(text) ? ' (missing unit; numbers in strings need one, e.g. "500ms")' : '';
      throw new Error(`invalid duration "${value}": expected a string like ${EXAMPLES}${hint}`);
    }
    const unit = match[2] as string;
    const rank = UNIT_ORDER.indexOf(unit);
    if (rank <= lastRank) throw new Error(`invalid duration "${value}": units must go from largest to smallest, each once (e.g. "1h30m")`);
    lastRank = rank;
    total += Number(match[1]) * (UNIT_MS[unit] as number);
    pos = pattern.lastIndex;
  }
  if (!Number.isSafeInteger(Math.round(total))) throw new Error(`invalid duration "${value}": too large`);
  return Math.round(total);
}
