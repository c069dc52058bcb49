/**
 * `stepd run --at TIME`: when a workflow may start (workflows.start_at). Either a delay from now
 * ("10m", "1h30m", "2d": the flow duration syntax, added to the database's clock so the client's
 * clock does not matter) or an ISO 8601 time with a date and, when it has a time of day, a zone
 * ("2026-12-01", "2026-12-01T09:00:00Z", "2026-12-01T09:00+01:00"). A date alone is midnight UTC.
 * Pure.
 */
import { parseDuration } from '../flow/duration.js';
import { CliError } from './common.js';

export type StartAt = { at: Date } | { inMs: number };

const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

export function parseStartAt(text: string): StartAt {
  const value = text.trim();
  if (/^\d/.test(value) && /^[\d.]+(ms|s|m|h|d)/.test(value)) {
    try {
      return { inMs: parseDuration(value) };
    } catch (err) {
      throw new CliError(`--at ${JSON.stringify(text)}: ${(err as Error).message}`);
    }
  }
  if (ISO_DATE.test(value) || ISO_DATE_TIME.test(value)) {
    const at = new Date(ISO_DATE.test(value) ? `${value}T00:00:00Z` : value);
    if (!Number.isNaN(at.getTime())) return { at };
  }
  if (/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/.test(value)) {
    throw new CliError(`--at ${JSON.stringify(text)}: give the time zone, e.g. ${value}Z (UTC) or ${value}+01:00`);
  }
  throw new CliError(`--at ${JSON.stringify(text)} is neither a delay ("10m", "1h30m", "2d") nor an ISO 8601 time ("2026-12-01T09:00:00Z")`);
}
