/**
 * The secret values of a running stepd: every value that a `${VAR}` of the config file expanded
 * to. They must never leave the process in a step result, a stored error, an event or a log
 * line, so everything tools hand back and every log line goes through `redact…` first, which
 * replaces each occurrence with `[redacted]`.
 *
 * Values shorter than MIN_SECRET_LENGTH characters are not treated as secrets: `${PORT}` = "80"
 * or `${DEBUG}` = "1" would otherwise blank out every "80" and "1" of every result. Real
 * credentials are longer.
 */

export const REDACTED = '[redacted]';
export const MIN_SECRET_LENGTH = 4;
/** How much of a remote server's error text (an HTTP body, a failed MCP reply) is kept. */
export const REMOTE_TEXT_CHARS = 1024;

export class Secrets {
  /** Each secret with the forms it takes once JSON-escaped (once and twice), longest first. */
  #needles: string[] = [];
  readonly #values = new Set<string>();

  constructor(values: Iterable<string> = []) {
    for (const v of values) this.add(v);
  }

  /** Adds a value (ignored when shorter than MIN_SECRET_LENGTH). */
  add(value: string): void {
    if (value.length < MIN_SECRET_LENGTH || this.#values.has(value)) return;
    this.#values.add(value);
    const once = JSON.stringify(value).slice(1, -1);
    const twice = JSON.stringify(once).slice(1, -1);
    const needles = new Set([...this.#needles, value, once, twice]);
    this.#needles = [...needles].sort((a, b) => b.length - a.length);
  }

  get size(): number {
    return this.#values.size;
  }

  /** True when `text` holds a secret in any of its forms. */
  appearsIn(text: string): boolean {
    for (const needle of this.#needles) if (text.includes(needle)) return true;
    return false;
  }

  /** `text` with every secret (also JSON-escaped) replaced by `[redacted]`. */
  redact(text: string): string {
    if (this.#needles.length === 0) return text;
    let out = text;
    for (const needle of this.#needles) if (out.includes(needle)) out = out.split(needle).join(REDACTED);
    return out;
  }

  /** A deep copy of a JSON-like value with secrets redacted in every string and key; the same value when nothing changes. */
  redactValue<T>(value: T): T {
    if (this.#needles.length === 0) return value;
    return redactDeep(value, this, new Set()) as T;
  }
}

function redactDeep(value: unknown, secrets: Secrets, seen: Set<object>): unknown {
  if (typeof value === 'string') return secrets.redact(value);
  if (typeof value !== 'object' || value === null || seen.has(value)) return value;
  if (!Array.isArray(value) && Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) {
    // Dates, buffers and class instances: replaced by what they serialize to only when that holds a secret.
    const json = JSON.stringify(value);
    return json !== undefined && secrets.appearsIn(json) ? redactDeep(JSON.parse(json) as unknown, secrets, seen) : value;
  }
  seen.add(value);
  let changed = false;
  let out: unknown;
  if (Array.isArray(value)) {
    const items = value.map((item) => {
      const r = redactDeep(item, secrets, seen);
      if (r !== item) changed = true;
      return r;
    });
    out = changed ? items : value;
  } else {
    const entries = Object.entries(value).map(([k, v]) => {
      const rk = secrets.redact(k);
      const rv = redactDeep(v, secrets, seen);
      if (rk !== k || rv !== v) changed = true;
      return [rk, rv] as const;
    });
    out = changed ? Object.fromEntries(entries) : value;
  }
  seen.delete(value);
  return out;
}

/**
 * A remote server's text as it may be stored or logged: redacted first (so a secret cut in half
 * by the limit cannot leak its first part), then cut to `max` characters.
 */
export function cutRemoteText(text: string, secrets: Secrets | undefined, max = REMOTE_TEXT_CHARS): string {
  const clean = secrets ? secrets.redact(text) : text;
  return clean.length > max ? `${clean.slice(0, max)}… (${clean.length - max} more characters cut)` : clean;
}
