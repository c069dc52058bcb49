/**
 * HTML built by a tagged template that escapes every interpolated value: workflow and step
 * names, errors, arguments and results are hostile input. Only values that are already `Html`
 * (built by this tag, or the page's own constant script and style through `trustedHtml`) pass
 * unescaped; arrays are joined; `null`, `undefined` and `false` render as nothing.
 */

export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** Escapes text for an element's content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (ch) => ENTITIES[ch]!);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(typeof value === 'string' ? value : String(value));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Markup the program itself wrote (its style sheet and script), never data. */
export function trustedHtml(constant: string): Html {
  return new Html(constant);
}

/** JSON for a `<pre>` block: pretty-printed and escaped (by the caller's `html`). */
export function prettyJson(value: unknown, maxChars = 20_000): string {
  let text: string;
  try {
    text = JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > maxChars ? `${text.slice(0, maxChars)}\n… (${text.length - maxChars} more characters)` : text;
}
