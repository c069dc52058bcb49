/**
 * PostgreSQL checkpoints so far (timed and requested), to count those that began during a
 * scenario: after one, the first change of every page writes a full page image to the WAL, so
 * the commits of a run that meets one wait longer, and its figures read high.
 * `pg_stat_checkpointer` from PostgreSQL 17, `pg_stat_bgwriter` before.
 */
export type Query = (text: string) => Promise<{ rows: Array<Record<string, unknown>> }>;

export async function checkpointsSoFar(query: Query): Promise<number> {
  const { rows: v } = await query(`SELECT pg_catalog.current_setting('server_version_num')::int AS v`);
  const text = Number(v[0]?.v) >= 170000
    ? 'SELECT (num_timed + num_requested)::float8 AS n FROM pg_catalog.pg_stat_checkpointer'
    : 'SELECT (checkpoints_timed + checkpoints_req)::float8 AS n FROM pg_catalog.pg_stat_bgwriter';
  const { rows } = await query(text);
  return Number(rows[0]?.n ?? Number.NaN);
}
