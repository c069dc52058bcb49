/**
 * Signals through the operations layer (src/api/operations.ts): what `stepd signal`, the MCP tool
 * `send_signal` and the approvals check about them. A signal is sent with the SQL contract's
 * INSERT on the pool's own role, which the database stamps as created_role; where that role is
 * shared by every user (the daemon's HTTP side) only admins may send. A step waiting for a signal
 * is no gate: approving or rejecting it is refused, saying what it waits for.
 */
import { describeSignalWait, sendSignalCommand, waitingSignalOf } from './views/signalWait.js';
import { compactJson } from './views/format.js';
import { insertSignal } from '../db/queries/signalRows.js';
import type { Queryable } from '../db/queries/common.js';
import { OperationError, toOperationError } from './errors.js';
import type { SendSignalInput, SentSignal } from './operationTypes.js';

export interface CheckedSignal {
  name: string;
  key: string | null;
  payload: Record<string, unknown>;
}

/** The signal to insert, or an OperationError saying why nothing is sent (no database needed). */
export function checkSignal(user: string, args: SendSignalInput, deps: { sharedRole?: boolean; admins?: readonly string[] }): CheckedSignal {
  if (deps.sharedRole && !(deps.admins ?? []).includes(user)) {
    throw new OperationError(
      'permission_denied',
      `user "${user}" may not send signals here: this server writes as its own database role, which the signal would carry instead of you; ` +
        'only an admin (config api.admins) may, or send it as your own role (stepd signal, or INSERT INTO signals)',
      { details: { user } },
    );
  }
  if (typeof args.name !== 'string' || args.name.trim() === '') throw new OperationError('invalid_input', 'the signal name must not be empty; no signal was sent');
  if (args.key !== undefined && args.key !== null && typeof args.key !== 'string') {
    throw new OperationError('invalid_input', `the key must be text (got ${JSON.stringify(args.key)}); no signal was sent`);
  }
  const payload = args.payload === undefined ? {} : args.payload;
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new OperationError('invalid_input', `the payload must be a JSON object, like {"amount": 1200} (got ${compactJson(payload, 200)}); no signal was sent`);
  }
  return { name: args.name, key: args.key === undefined || args.key === null || args.key === '' ? null : args.key, payload: payload as Record<string, unknown> };
}

/** Inserts it; the database's refusals (name, key, size 54000, no grant 42501) say that nothing was sent. */
export async function insertSignalOrExplain(db: Queryable, schema: string, signal: CheckedSignal): Promise<SentSignal> {
  try {
    const row = await insertSignal(db, signal);
    return { signalId: String(row.id), name: row.name, key: row.key, payload: row.payload, createdAt: new Date(row.created_at).toISOString(), createdRole: row.created_role };
  } catch (err) {
    const refused = toOperationError(err);
    if (refused.code === 'invalid_input' || refused.code === 'refused') throw new OperationError(refused.code, `${refused.message}; no signal was sent`, { cause: err });
    if ((err as { code?: unknown } | null)?.code === '42501') {
      throw new OperationError('permission_denied', `${(err as Error).message}: this database role may not send signals (it needs the ${schema}_client role); no signal was sent`, { cause: err });
    }
    throw err;
  }
}

/** Refuses to approve or reject (`verb`) a pending step that waits for a signal. */
export function refuseSignalWait(step: { id: string; name: string; tool: string | null; args: unknown }, verb: 'approved' | 'rejected'): void {
  const signal = waitingSignalOf(step);
  if (!signal) return;
  throw new OperationError(
    'refused',
    `step ${step.id} (${step.name}) is not a gate: it waits for ${describeSignalWait(signal)} and goes on when one is sent (${sendSignalCommand(signal)}); it cannot be ${verb}`,
    { details: { signal } },
  );
}
