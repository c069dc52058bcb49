/**
 * The claim statement exactly as the executor sends it. It is taken from the built
 * src/db/queries.js at run time: `claimReadySteps` is called with a recording connection, so
 * the benchmark keeps timing the real statement while the executor's SQL changes. If that
 * function is gone or has a new shape, a copy of the statement (as of this harness) is used and
 * the report says so.
 */
export interface ClaimStatement {
  name?: string;
  text: string;
  values: unknown[];
  source: 'queries.claimReadySteps' | 'copy';
}

const COPY_TEXT = `WITH claimed AS (
             UPDATE workflow_steps
                SET status = 'running', started_at = now(), executor_id = $1,
                    lease_until = now() + $3 * interval '1 millisecond'
              WHERE id IN (SELECT id FROM workflow_steps
                            WHERE status = 'ready' AND ready_at <= now()
                              AND (cardinality($4::text[]) = 0 OR tool IS NULL OR NOT (tool LIKE ANY($4::text[])))
                              AND (cardinality($5::text[]) = 0 OR NOT EXISTS (
                                    SELECT 1 FROM workflows w
                                     WHERE w.id = workflow_steps.workflow_id AND w.created_by = ANY($5::text[])))
                            ORDER BY ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
          RETURNING *)
           SELECT claimed.*, w.created_by FROM claimed JOIN workflows w ON w.id = claimed.workflow_id`;

type Recorded = { text: string; values?: unknown[]; name?: string };

/** The executor's default concurrency: the batch size of a claim on an idle executor. */
export async function defaultClaimLimit(): Promise<number> {
  try {
    const mod = (await import(new URL('../../src/executor/executor.js', import.meta.url).href)) as {
      DEFAULT_EXECUTOR_OPTIONS?: { concurrency?: unknown };
    };
    const n = mod.DEFAULT_EXECUTOR_OPTIONS?.concurrency;
    return typeof n === 'number' && n > 0 ? n : 32;
  } catch {
    return 32;
  }
}

export async function claimStatement(executorId: string, limit: number, leaseMs: number): Promise<ClaimStatement> {
  const recorded: Recorded[] = [];
  try {
    const mod = (await import(new URL('../../src/db/queries.js', import.meta.url).href)) as { claimReadySteps?: unknown };
    if (typeof mod.claimReadySteps === 'function') {
      const recorder = {
        async query(config: Recorded | string, values?: unknown[]) {
          recorded.push(typeof config === 'string' ? { text: config, ...(values ? { values } : {}) } : config);
          return { rows: [], rowCount: 0 };
        },
      };
      await (mod.claimReadySteps as (db: unknown, opts: unknown) => Promise<unknown>)(recorder, {
        executorId,
        limit,
        leaseMs,
        skipToolsLike: [],
        skipUsers: [],
      });
    }
  } catch {
    // fall through to the copy
  }
  const claim = recorded.find((r) => /status\s*=\s*'ready'/.test(r.text));
  if (claim) return { ...(claim.name ? { name: claim.name } : {}), text: claim.text, values: claim.values ?? [], source: 'queries.claimReadySteps' };
  return { name: 'stepd_claim_ready_steps', text: COPY_TEXT, values: [executorId, limit, leaseMs, [], []], source: 'copy' };
}
