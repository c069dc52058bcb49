/**
 * The config's `clients.ROLE.actAs` patterns as the database's guards read them (sql/0038,
 * client_act_as): who may cancel a workflow or ready its steps besides its own role. Written when
 * an executor starts, as the size and priority caps are (the last executor to start wins:
 * executors share one config). Roles not named act only as themselves.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ClientsConfig } from '../../configFile.js';
import type { Queryable } from './common.js';

export async function writeActAsRules(db: Queryable, clients: ClientsConfig | undefined, executorId: string): Promise<void> {
  const rules = Object.entries(clients ?? {}).flatMap(([role, c]) => (c.actAs && c.actAs.length > 0 ? [{ role, patterns: c.actAs }] : []));
  await db.query({
    name: 'stepd_write_act_as_rules',
    text: `WITH gone AS (DELETE FROM client_act_as WHERE role <> ALL($1::text[]))
           INSERT INTO client_act_as (role, patterns, written_by, written_at)
           SELECT r, ARRAY(SELECT jsonb_array_elements_text(p)), $3, now()
             FROM unnest($1::text[], $2::jsonb[]) AS u(r, p)
           ON CONFLICT (role) DO UPDATE SET patterns = excluded.patterns, written_by = excluded.written_by, written_at = now()`,
    values: [rules.map((r) => r.role), rules.map((r) => JSON.stringify(r.patterns)), executorId],
  });
}
