/**
 * What a payload on `stepd_wakeup` may tell the executor. Any role that can connect may NOTIFY
 * on any channel (PostgreSQL has no privilege for it), so a wake-up is a hint of where to look,
 * never a fact: new workflows may wait (admission looks), a redrive may be requested (redrive
 * looks), a step may be ready (a claim looks), a signal may have deferred a match past a held
 * wait row (the deferred matches are tried: deferredSignalRetry.ts), a workflow may have been
 * cancelled (its row is read before any running tool is aborted: cancelChecks.ts). Anything else — another schema, a
 * table or status no trigger sends, an id that is no id, text that is not JSON — is ignored. Pure.
 */

export const WAKEUP_CHANNEL = 'stepd_wakeup';

export type WakeupHint = { kind: 'admit' } | { kind: 'redrive' } | { kind: 'stepReady' } | { kind: 'signalDeferred' } | { kind: 'cancelled'; workflowId: string };

/** A bigint id as the triggers send it (a number) or as text: digits only, no sign, at most 19 of them. */
function idOf(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? String(value) : undefined;
  return typeof value === 'string' && /^[1-9][0-9]{0,18}$/.test(value) ? value : undefined;
}

/** The hint a payload gives this schema's executor, or undefined when it gives none. */
export function parseWakeup(payload: string, schema: string): WakeupHint | undefined {
  let p: unknown;
  try {
    p = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (typeof p !== 'object' || p === null || Array.isArray(p)) return undefined;
  const { schema: s, table, status, id } = p as Record<string, unknown>;
  if (s !== schema || typeof status !== 'string') return undefined;
  if (table === 'workflow_steps') return status === 'ready' ? { kind: 'stepReady' } : undefined;
  if (table === 'signal_deferred_matches') return status === 'deferred' ? { kind: 'signalDeferred' } : undefined;
  if (table !== 'workflows') return undefined;
  if (status === 'new') return { kind: 'admit' };
  if (status === 'running') return { kind: 'redrive' };
  if (status !== 'cancelled') return undefined;
  const workflowId = idOf(id);
  return workflowId === undefined ? undefined : { kind: 'cancelled', workflowId };
}
