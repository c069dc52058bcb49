/** Small, pure text formatting, the same in the CLI's output, the dashboard's pages and the MCP tools' answers. */

/** 70ms, 1.2s, 2m05s, 1h02m. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) ms = 0;
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1).replace(/\.?0+$/, '')}s`;
  const s = Math.floor(ms / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  const m = Math.floor(s / 60);
  if (m < 48 * 60) return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(m / 1440)}d${String(Math.floor((m % 1440) / 60)).padStart(2, '0')}h`;
}

/** Milliseconds between two instants, or undefined when either is missing. */
export function between(from: Date | string | null | undefined, to: Date | string | null | undefined): number | undefined {
  if (!from || !to) return undefined;
  const ms = new Date(to).getTime() - new Date(from).getTime();
  return Number.isFinite(ms) ? Math.max(0, ms) : undefined;
}

/** HH:MM:SS local time. */
export function formatClock(at: Date | string): string {
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return String(at);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

/** HH:MM:SS for today, else YYYY-MM-DD HH:MM (local time). */
export function formatWhen(at: Date | string, now: Date = new Date()): string {
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return String(at);
  if (d.toDateString() === now.toDateString()) return formatClock(d);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** JSON on one line, cut to `max` characters. */
export function compactJson(value: unknown, max = 200): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}

/** `[code] message (step NAME)` for an error column or event error. */
export function formatError(error: unknown): string {
  if (error === null || error === undefined) return '';
  if (typeof error !== 'object') return String(error);
  const e = error as { code?: unknown; message?: unknown; step?: unknown };
  const code = typeof e.code === 'string' ? `[${e.code}] ` : '';
  const message = typeof e.message === 'string' ? e.message : compactJson(error);
  const step = typeof e.step === 'string' ? ` (step ${e.step})` : '';
  return `${code}${message}${step}`;
}

/** Fixed-width columns for a small table. */
export function table(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

/** `2026-11-25 10:42:07` in UTC. */
export function utc(iso: string | null): string {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, '').replace(/Z$/, '') : '';
}
