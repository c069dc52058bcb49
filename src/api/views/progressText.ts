/** A step's progress in words, for `run --follow`, `watch` and `status`: `3/5 (60%): copying`. */

export function formatProgress(p: { progress: number; total?: number | undefined; message?: string | undefined } | null | undefined): string {
  if (!p || typeof p.progress !== 'number') return '';
  const share = typeof p.total === 'number' && p.total > 0 ? ` (${Math.min(100, Math.round((p.progress / p.total) * 100))}%)` : '';
  const amount = typeof p.total === 'number' ? `${p.progress}/${p.total}${share}` : String(p.progress);
  return typeof p.message === 'string' && p.message !== '' ? `${amount}: ${p.message}` : amount;
}
