/**
 * The caps the database checks before work (sql/0021): the executor writes its config's caps into
 * the one row of size_caps when it starts, so clients' over-cap inputs, results and flows are
 * refused at INSERT/UPDATE, before any executor loads them. Part of the runtime statement
 * catalogue (src/db/queries.ts re-exports every module).
 */
import type { Caps } from '../../flow/caps.js';
import { MAX_FLOW_BYTES } from '../../flow/spec.js';
import type { Queryable } from './common.js';

/** Writes the executor's caps (the last executor to start wins: executors share one config). */
export async function writeSizeCaps(db: Queryable, caps: Readonly<Caps>, executorId: string): Promise<void> {
  await db.query({
    name: 'stepd_write_size_caps',
    text: `INSERT INTO size_caps (id, input_bytes, result_bytes, flow_bytes, flow_steps, written_by, written_at)
           VALUES (true, $1, $2, $3, $4, $5, now())
           ON CONFLICT (id) DO UPDATE
              SET input_bytes = $1, result_bytes = $2, flow_bytes = $3, flow_steps = $4, written_by = $5, written_at = now()`,
    values: [caps.inputBytes, caps.resultBytes, MAX_FLOW_BYTES, caps.flowSteps, executorId],
  });
}
