/**
 * Statements on the flow registry (`flows`, sql/0009_definitions.sql): immutable numbered
 * versions of named flows. The database numbers versions and stamps who wrote them.
 */
import { jsonParam, type Queryable } from './common.js';

export interface FlowVersionRow {
  name: string;
  version: number;
  flow: unknown;
  created_at: Date;
  created_by: string | null;
}

export interface FlowSummaryRow {
  name: string;
  /** The latest version. */
  version: number;
  versions: number;
  created_at: Date;
  created_by: string | null;
}

/**
 * Stores `flow` as the next version of `name`, unless it equals the latest version (as jsonb,
 * so key order and spacing do not count): then returns that version with `created: false`.
 * Must run inside a transaction: the per-name lock taken first makes concurrent identical puts
 * store one version.
 */
export async function putFlowVersionUnlessLatestIsSame(
  db: Queryable,
  entry: { name: string; flow: unknown; createdBy: string | null },
): Promise<{ version: number; created: boolean }> {
  await db.query({
    text: `SELECT pg_advisory_xact_lock(hashtext('stepd.flows'), hashtext(current_schema() || '.' || $1))`,
    values: [entry.name],
  });
  const { rows: latest } = await db.query<{ version: number; same: boolean }>({
    text: `SELECT version, flow = $2::jsonb AS same FROM flows WHERE name = $1 ORDER BY version DESC LIMIT 1`,
    values: [entry.name, jsonParam(entry.flow)],
  });
  if (latest[0]?.same) return { version: latest[0].version, created: false };
  const { rows } = await db.query<{ version: number }>({
    text: `INSERT INTO flows (name, flow, created_by) VALUES ($1, $2::jsonb, $3) RETURNING version`,
    values: [entry.name, jsonParam(entry.flow), entry.createdBy],
  });
  return { version: rows[0]!.version, created: true };
}

/** One version of a flow; `version` null means the latest. `undefined` when there is none. */
export async function loadFlowVersion(db: Queryable, name: string, version: number | null): Promise<FlowVersionRow | undefined> {
  const { rows } = await db.query<FlowVersionRow>({
    name: 'stepd_load_flow_version',
    text: `SELECT name, version, flow, created_at, created_by FROM flows
            WHERE name = $1 AND ($2::integer IS NULL OR version = $2::integer)
            ORDER BY version DESC LIMIT 1`,
    values: [name, version],
  });
  return rows[0];
}

/** Every registered flow with its latest version, by name. */
export async function listFlowsLatest(db: Queryable, limit = 1000): Promise<FlowSummaryRow[]> {
  const { rows } = await db.query<FlowSummaryRow>({
    text: `SELECT DISTINCT ON (name) name, version, count(*) OVER (PARTITION BY name)::integer AS versions, created_at, created_by
             FROM flows ORDER BY name, version DESC LIMIT $1`,
    values: [limit],
  });
  return rows;
}

/** Every version of one flow, newest first. */
export async function listFlowVersions(db: Queryable, name: string): Promise<Omit<FlowVersionRow, 'flow'>[]> {
  const { rows } = await db.query<Omit<FlowVersionRow, 'flow'>>({
    text: `SELECT name, version, created_at, created_by FROM flows WHERE name = $1 ORDER BY version DESC`,
    values: [name],
  });
  return rows;
}
