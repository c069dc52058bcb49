/**
 * What a waiting `signal` step waits for, read from its row (so `stepd status`, `run --follow`,
 * the dashboard, the MCP tools and the `step.waiting` event all say the same): a pending row
 * without a tool whose `args.signal` is `{names, key, since}` (the key resolved, `since` the
 * instant from which signals count). It is not an approval gate: nothing offers to approve it;
 * the way on is to send the signal. Pure.
 */
import { formatDuration, formatWhen, between } from './format.js';

export interface SignalWait {
  /** The signal names it accepts; the first of any of them wins. */
  names: string[];
  /** The key a signal must carry; null: any key. */
  key: string | null;
  /** Signals created at or after this instant count (ISO). */
  since: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The wait of a step row, or undefined when the row is no signal wait (a tool step, a gate, a timer…). */
export function waitingSignalOf(row: { tool: string | null; args: unknown }): SignalWait | undefined {
  if (row.tool !== null || !isObject(row.args) || !isObject(row.args.signal)) return undefined;
  const s = row.args.signal;
  const names = (Array.isArray(s.names) ? s.names : typeof s.name === 'string' ? [s.name] : []).filter((n): n is string => typeof n === 'string');
  if (names.length === 0) return undefined;
  const since = typeof s.since === 'string' && !Number.isNaN(Date.parse(s.since)) ? new Date(s.since).toISOString() : '';
  return { names, key: typeof s.key === 'string' ? s.key : null, since };
}

/** `signal payment.received (key order-42)`, `signal a or b (any key)`. */
export function describeSignalWait(w: SignalWait): string {
  return `signal ${w.names.join(' or ')} (${w.key === null ? 'any key' : `key ${w.key}`})`;
}

/** `waits for signal payment.received (key order-42) since 10:31:02 (2m05s ago)[, expires in 23h57m]`. */
export function signalWaitText(w: SignalWait, now: Date, expiresAt?: string | null): string {
  const ago = w.since ? ` (${formatDuration(between(w.since, now) ?? 0)} ago)` : '';
  const since = w.since ? ` since ${formatWhen(w.since, now)}${ago}` : '';
  const expires = expiresAt ? `, expires in ${formatDuration(between(now, expiresAt) ?? 0)}` : '';
  return `waits for ${describeSignalWait(w)}${since}${expires}`;
}

/** The command that sends a signal this wait accepts (its first name). */
export function sendSignalCommand(w: SignalWait): string {
  return `stepd signal ${shellWord(w.names[0]!)}${w.key === null ? '' : ` --key ${shellWord(w.key)}`}`;
}

/** A word as a POSIX shell reads it: bare when it is plain, else single-quoted. */
function shellWord(text: string): string {
  return /^[A-Za-z0-9._:@/+=-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}
