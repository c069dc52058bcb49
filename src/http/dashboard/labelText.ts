/**
 * Text from a flow or a row (step names, conditions, errors) made fit for a label in a picture:
 * characters that are invisible or reorder the text around them (control characters, bidi
 * overrides and isolates, zero-width characters, line separators) become a visible `�`, and long
 * text is cut between code points (never inside an emoji) with `…`. Escaping is still the `html`
 * tag's job: this only keeps one label from disguising or swallowing the others.
 */

// C0 and C1 controls, zero-width and bidi formatting characters, line and paragraph separators, BOM.
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/gu;

export function labelText(text: string, maxChars: number): string {
  const points = Array.from(text.replace(HIDDEN, '\ufffd'));
  return points.length > maxChars ? `${points.slice(0, Math.max(1, maxChars - 1)).join('')}…` : points.join('');
}
