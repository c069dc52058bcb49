/** Which database errors one row's data can cause: claims (claimSteps.ts, claimGated.ts) then isolate the row. */

/** A claim failed on one row: retry it row by row (SQLSTATE classes a single row's data can cause). */
export function isRowSpecificPgError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || code.length !== 5) return false;
  return ['22', '23', '54', 'P0', '39', '2F'].includes(code.slice(0, 2));
}
