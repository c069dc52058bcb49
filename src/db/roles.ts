/**
 * The two roles of a schema's trust boundary and what each may do (DESIGN.md §7):
 *   <schema>_executor — everything the executor needs on stepd's tables;
 *   <schema>_client   — exactly the SQL contract: insert workflows, read both tables, the guarded
 *                       updates (cancel, redrive, edit its own new workflow, ready a pending step),
 *                       delete its finished workflows and remove its schedules and signal
 *                       triggers through SECURITY DEFINER functions (sql/0020, sql/0026), read the
 *                       flow registry and add versions, send and read signals (sql/0024), add
 *                       and change its own signal triggers (sql/0026). The guard triggers decide
 *                       which rows and values;
 *   <schema>_worker   — the worker contract only (sql/0027, sql/0037): EXECUTE on take_tasks,
 *                       finish_task, finish_tasks, fail_task, extend_task and progress_task; no
 *                       table, no other function.
 * Clients hold no table-level UPDATE, DELETE or TRUNCATE privilege: PostgreSQL lets any of those
 * take every LOCK TABLE mode, so one client could hold ACCESS EXCLUSIVE and stall everyone.
 * Deployments `GRANT <schema>_client TO app_service` and run the daemon as a member of
 * `<schema>_executor`. The statements here are idempotent; they name only validated identifiers.
 */
import pg from 'pg';

export interface SchemaRoles {
  executor: string;
  client: string;
  /** Serves worker tools through the SQL worker contract (sql/0027, docs/workers.md). */
  worker: string;
}

export function schemaRoles(schema: string): SchemaRoles {
  return { executor: `${schema}_executor`, client: `${schema}_client`, worker: `${schema}_worker` };
}

const ident = (name: string): string => pg.escapeIdentifier(name);
const literal = (value: string): string => pg.escapeLiteral(value);

/** Creates a NOLOGIN role unless it exists (tolerating a concurrent creation). */
export function createRoleStatement(role: string): string {
  return `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${literal(role)}) THEN
    CREATE ROLE ${ident(role)} NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$`;
}

/** Grants of both roles on the schema's tables (`tables`: every stepd table but the migrations log). */
export function grantStatements(schema: string, tables: string[]): string[] {
  const r = schemaRoles(schema);
  const s = ident(schema);
  const t = (name: string) => `${s}.${ident(name)}`;
  const executorTables = tables.map(t).join(', ');
  return [
    `GRANT USAGE ON SCHEMA ${s} TO ${ident(r.executor)}, ${ident(r.client)}, ${ident(r.worker)}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ${executorTables} TO ${ident(r.executor)}`,
    `GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${s} TO ${ident(r.executor)}`,
    // `stepd start` runs the migrator, which only reads the log when nothing is pending.
    `GRANT SELECT ON ${t('stepd_migrations')} TO ${ident(r.executor)}`,
    `GRANT SELECT ON ${t('workflows')}, ${t('workflow_steps')} TO ${ident(r.client)}`,
    `GRANT INSERT (name, flow, flow_version, input, created_by, key, start_at) ON ${t('workflows')} TO ${ident(r.client)}`,
    `GRANT UPDATE (status, name, flow, flow_version, input, created_by, key, start_at) ON ${t('workflows')} TO ${ident(r.client)}`,
    // The flow registry: clients read it and add versions (numbered and stamped by a trigger).
    `GRANT SELECT ON ${t('flows')} TO ${ident(r.client)}`,
    `GRANT INSERT (name, flow, created_by) ON ${t('flows')} TO ${ident(r.client)}`,
    // Deployments migrated before sql/0020 granted these (LOCK TABLE in any mode): taken back.
    `REVOKE DELETE ON ${t('workflows')} FROM ${ident(r.client)}`,
    `GRANT EXECUTE ON FUNCTION ${s}.delete_workflows(pg_catalog.int8[]) TO ${ident(r.executor)}, ${ident(r.client)}`,
    // Forks (sql/0031): the function judges who may fork what.
    `GRANT EXECUTE ON FUNCTION ${s}.fork_workflow(pg_catalog.int8, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) TO ${ident(r.executor)}, ${ident(r.client)}`,
    // Schedules (sql/0014): clients add, change and remove them; the role that wrote one is stamped.
    ...(tables.includes('schedules')
      ? [
          `REVOKE DELETE ON ${t('schedules')} FROM ${ident(r.client)}`,
          `GRANT SELECT ON ${t('schedules')} TO ${ident(r.client)}`,
          `GRANT INSERT (name, cron, tz, flow, input, created_by), UPDATE (cron, tz, flow, input, created_by) ON ${t('schedules')} TO ${ident(r.client)}`,
          // Schedule policies (sql/0033): overlap, catch-up, pause/resume.
          `GRANT INSERT (overlap, catch_up, paused), UPDATE (overlap, catch_up, paused) ON ${t('schedules')} TO ${ident(r.client)}`,
          `GRANT EXECUTE ON FUNCTION ${s}.remove_schedule(pg_catalog.text) TO ${ident(r.executor)}, ${ident(r.client)}`,
        ]
      : []),
    `GRANT UPDATE (status, result, readied_by) ON ${t('workflow_steps')} TO ${ident(r.client)}`,
    // Priority (sql/0028): clients set it at insert (lowered to their cap, which the insert trigger reads), never later.
    ...(tables.includes('priority_caps')
      ? [
          `GRANT INSERT (priority) ON ${t('workflows')} TO ${ident(r.client)}`,
          `GRANT SELECT ON ${t('priority_caps')} TO ${ident(r.client)}`,
          `GRANT EXECUTE ON FUNCTION ${s}.capacity_verdicts(pg_catalog.int8[], pg_catalog.int4) TO ${ident(r.executor)}`,
        ]
      : []),
    // Executor liveness (sql/0007): clients read only whether executors beat (`run --follow` says when none is alive), never host or pid.
    ...(tables.includes('executors') ? [`GRANT SELECT (id, last_beat_at, dead_after_ms) ON ${t('executors')} TO ${ident(r.client)}`] : []),
    // The caps the database checks before work (sql/0021): clients read them, only executors write them.
    ...(tables.includes('size_caps') ? [`GRANT SELECT ON ${t('size_caps')} TO ${ident(r.client)}`] : []),
    // Signals (sql/0024): clients send and read them, never change or delete them.
    ...(tables.includes('signals') ? [`GRANT SELECT, INSERT (name, key, payload) ON ${t('signals')} TO ${ident(r.client)}`] : []),
    // Signal matches deferred past a held wait row (sql/0042): the executors complete them, clients see nothing.
    ...(tables.includes('signal_deferred_matches')
      ? [`GRANT EXECUTE ON FUNCTION ${s}.stepd_ready_deferred_matches_of_running_workflows(pg_catalog.int4) TO ${ident(r.executor)}`]
      : []),
    // Signal triggers (sql/0026): clients add and change their own, remove them through remove_trigger.
    ...(tables.includes('triggers')
      ? [
          `GRANT SELECT ON ${t('triggers')} TO ${ident(r.client)}`,
          `GRANT INSERT (name, signal, flow, input, run_as), UPDATE (signal, flow, input, run_as) ON ${t('triggers')} TO ${ident(r.client)}`,
          `GRANT EXECUTE ON FUNCTION ${s}.remove_trigger(pg_catalog.text) TO ${ident(r.executor)}, ${ident(r.client)}`,
        ]
      : []),
    ...workerGrantStatements(schema),
  ];
}

/** The worker contract (sql/0027, sql/0037): the worker role may call these six and nothing else; executors sweep leases. */
function workerGrantStatements(schema: string): string[] {
  const r = schemaRoles(schema);
  const s = ident(schema);
  const fns = [
    'take_tasks(pg_catalog.text[], pg_catalog.int4, pg_catalog.interval)',
    'finish_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.jsonb)',
    'finish_tasks(pg_catalog.int8[], pg_catalog.uuid[], pg_catalog.jsonb[])',
    'fail_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.jsonb)',
    'extend_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.interval)',
    'progress_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.jsonb)',
  ];
  return [
    ...fns.map((f) => `GRANT EXECUTE ON FUNCTION ${s}.${f} TO ${ident(r.worker)}`),
    `GRANT EXECUTE ON FUNCTION ${s}.stepd_expire_tasks(pg_catalog.int4) TO ${ident(r.executor)}`,
  ];
}

/** The whole setup as a script a DBA can run (when the migrating role may not create roles). */
export function roleSetupScript(schema: string, tables: string[]): string {
  const r = schemaRoles(schema);
  return [createRoleStatement(r.executor), createRoleStatement(r.client), createRoleStatement(r.worker), ...grantStatements(schema, tables)].map((x) => `${x};`).join('\n');
}
