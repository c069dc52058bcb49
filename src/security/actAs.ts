/**
 * Who a database role may start workflows as (DESIGN.md §7, config section `clients`):
 *   "clients": { "ROLE": { "actAs": ["pattern", …] } }   — `*` stands for any characters.
 * A role without an entry may act only as itself; a null `created_by` means the role's own name.
 * Trusted roles (superusers, members of <schema>_executor or of the tables' owner) may act as
 * anyone, a null `created_by` included, so the zero-setup embedded default works as before.
 * Pure: the database tells whether the role is trusted.
 */
import type { ClientsConfig } from '../configFile.js';

export interface WorkflowIdentity {
  /** session_user of the insert (or of the last edit while new); null for the executor's own rows. */
  role: string | null;
  /** Whether that role is trusted (decided by the database at admission). */
  trusted: boolean;
  createdBy: string | null;
}

export type ActAsDecision =
  | { ok: true; user: string | null }
  | { ok: false; message: string; details: { role: string; user: string } };

/** `*` matches any run of characters; everything else literally. No regular expressions. */
export function matchesUserPattern(pattern: string, value: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === value;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!value.startsWith(first) || value.length < first.length + last.length || !value.endsWith(last)) return false;
  let at = first.length;
  const end = value.length - last.length;
  for (const middle of parts.slice(1, -1)) {
    const found = value.indexOf(middle, at);
    if (found < 0 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}

export function decideActingUser(identity: WorkflowIdentity, clients: ClientsConfig | undefined): ActAsDecision {
  if (identity.role === null || identity.trusted) return { ok: true, user: identity.createdBy };
  const role = identity.role;
  const user = identity.createdBy ?? role;
  if (user === role) return { ok: true, user };
  const patterns = clients?.[role]?.actAs ?? [];
  if (patterns.some((p) => matchesUserPattern(p, user))) return { ok: true, user };
  const why = patterns.length === 0 ? `it has no "clients" entry, so it may act only as itself` : `its actAs patterns (${patterns.join(', ')}) do not match`;
  return { ok: false, message: `database role "${role}" may not start workflows as user "${user}": ${why}`, details: { role, user } };
}
