/**
 * Whether this connection's database role may act as `user` (config `clients`, the rules of
 * src/security/actAs.ts): admission fails a workflow whose role may not act as its created_by,
 * and the daemon refuses an approval of a gate with approvers by a role that may not act as its
 * readied_by. Checked up front so a caller hears it at once, in those words.
 */
import type { ClientsConfig } from '../configFile.js';
import type { Queryable } from '../db/queries/common.js';
import { isRoleTrusted } from '../db/queries/gates.js';
import { decideActingUser } from '../security/actAs.js';
import { OperationError } from './errors.js';

/**
 * Throws permission_denied when the session's role may not act as `user`: "database role R may
 * not `doing` as user U: why; nothing was started|readied".
 */
export async function refuseUnlessRoleActsAs(
  db: Queryable,
  clients: ClientsConfig | undefined,
  user: string,
  action: { doing: 'start workflows' | 'approve'; consequence: string },
): Promise<void> {
  const { rows } = await db.query<{ role: string }>({ text: 'SELECT session_user AS role' });
  const role = rows[0]!.role;
  const decision = decideActingUser({ role, trusted: await isRoleTrusted(db, role), createdBy: user }, clients);
  if (decision.ok) return;
  const patterns = clients?.[role]?.actAs ?? [];
  const why = patterns.length === 0 ? 'it has no "clients" entry, so it may act only as itself' : `its actAs patterns (${patterns.join(', ')}) do not match`;
  throw new OperationError('permission_denied', `database role "${role}" may not ${action.doing} as user "${user}": ${why}; ${action.consequence}`, { details: decision.details });
}
