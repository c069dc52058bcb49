/**
 * The list page's capacity panel: ready steps held back by a full concurrency key and steps
 * waiting for a rate token (docs/limits-and-fairness.md), read at each render. Nothing is shown
 * while none wait.
 */
import type { CapacityGauges } from '../../db/queries/capacity.js';
import { html, type Html } from '../html.js';

export function capacityPanel(g: CapacityGauges | undefined): Html | '' {
  if (!g) return '';
  const keyed = g.keyBlocked.reduce((a, k) => a + k.n, 0);
  const throttled = g.throttled.reduce((a, b) => a + b.n, 0);
  if (keyed === 0 && throttled === 0) return '';
  const list = (items: { label: string; n: number }[]) => items.map((i, n) => html`${n > 0 ? ', ' : ''}<code>${i.label || '(others)'}</code> ${i.n}`);
  return html`<section id="capacity" aria-label="waiting for capacity">
${keyed > 0 ? html`<p><strong class="s-pending" data-key-blocked="${keyed}">${keyed}</strong> ready step(s) wait for a full concurrency key: ${list(g.keyBlocked.map((k) => ({ label: k.key, n: k.n })))}</p>` : ''}
${throttled > 0 ? html`<p><strong class="s-pending" data-throttled="${throttled}">${throttled}</strong> ready step(s) wait for a rate token: ${list(g.throttled.map((b) => ({ label: b.bucket, n: b.n })))}</p>` : ''}
</section>`;
}
