/**
 * The executors' leases (sql/0018_executor_leases.sql): rows of `executor_leases`, a table only
 * the executor role may read or write, in place of advisory locks any connected role could take.
 *   - `executor:<id>`: which process runs under an executor id, bound to its listener session;
 *   - `watchdog`: which executor leads the watchdog, until when (renewed at every sweep);
 *   - `claim-limits`: locked by limited claims (claims.ts, lockClaimLimits).
 * Each statement records the calling session (pg_backend_pid() and its application_name), so
 * these run on the listener's dedicated connection. A holder whose session ended (a crash, a
 * PostgreSQL restart) is gone: `stepd_executor_session_alive` asks pg_stat_activity, trusting
 * only sessions of an executor role. Part of the runtime statement catalogue (src/db/queries.ts).
 */
import { type Queryable } from './common.js';

/**
 * Claims `executorId` for the process holding `token`, on this session: unless another token
 * holds it from a session that is still alive. True when this process holds it now.
 */
export async function claimExecutorIdUnlessHeldByLiveSession(db: Queryable, v: { executorId: string; token: string }): Promise<boolean> {
  const { rows } = await db.query<{ holder: string }>({
    name: 'stepd_claim_executor_id_unless_held_by_live_session',
    text: `INSERT INTO executor_leases AS l (name, holder, session_pid, session_app, until, updated_at)
           SELECT 'executor:' || $1::text, $2::text, a.pid, a.application_name, NULL, now()
             FROM pg_stat_get_activity(pg_backend_pid()) a
           ON CONFLICT (name) DO UPDATE
              SET holder = EXCLUDED.holder, session_pid = EXCLUDED.session_pid,
                  session_app = EXCLUDED.session_app, updated_at = now()
            WHERE l.holder IS NOT DISTINCT FROM EXCLUDED.holder
               OR NOT stepd_executor_session_alive(l.session_pid, l.session_app)
           RETURNING l.holder`,
    values: [v.executorId, v.token],
  });
  return rows.length > 0;
}

/** A clean stop: gives the id back, if this process (`token`) still holds it. */
export async function releaseExecutorIdIfHeld(db: Queryable, v: { executorId: string; token: string }): Promise<void> {
  await db.query({
    name: 'stepd_release_executor_id_if_held',
    text: `DELETE FROM executor_leases WHERE name = 'executor:' || $1::text AND holder = $2`,
    values: [v.executorId, v.token],
  });
}

/**
 * Forgets the executor-id claims whose session has ended (crashed executors): the table lists
 * the ids in use. A live executor whose listener is reconnecting claims its id again.
 */
export async function forgetExecutorIdClaimsOfEndedSessions(db: Queryable): Promise<number> {
  const { rowCount } = await db.query({
    name: 'stepd_forget_executor_id_claims_of_ended_sessions',
    text: `DELETE FROM executor_leases
            WHERE name LIKE 'executor:%' AND NOT stepd_executor_session_alive(session_pid, session_app)`,
  });
  return rowCount ?? 0;
}

/**
 * Takes the watchdog lease for `executorId` on this session, or renews it, for `leaseMs`:
 * unless another executor holds it, its lease has not run out and its session is alive.
 * True when `executorId` leads until the new expiry.
 */
export async function takeOrRenewWatchdogLeaseUnlessHeldByLiveLeader(db: Queryable, v: { executorId: string; leaseMs: number }): Promise<boolean> {
  const { rows } = await db.query<{ holder: string }>({
    name: 'stepd_take_or_renew_watchdog_lease_unless_held_by_live_leader',
    text: `INSERT INTO executor_leases AS l (name, holder, session_pid, session_app, until, updated_at)
           SELECT 'watchdog', $1::text, a.pid, a.application_name, now() + $2 * interval '1 millisecond', now()
             FROM pg_stat_get_activity(pg_backend_pid()) a
           ON CONFLICT (name) DO UPDATE
              SET holder = EXCLUDED.holder, session_pid = EXCLUDED.session_pid,
                  session_app = EXCLUDED.session_app, until = EXCLUDED.until, updated_at = now()
            WHERE l.holder IS NOT DISTINCT FROM EXCLUDED.holder
               OR l.holder IS NULL OR l.until IS NULL OR l.until < now()
               OR NOT stepd_executor_session_alive(l.session_pid, l.session_app)
           RETURNING l.holder`,
    values: [v.executorId, v.leaseMs],
  });
  return rows.length > 0;
}

/** A clean stop of the leader: the lease runs out now, so another executor leads at its next sweep. */
export async function releaseWatchdogLeaseIfHeld(db: Queryable, executorId: string): Promise<void> {
  await db.query({
    name: 'stepd_release_watchdog_lease_if_held',
    text: `UPDATE executor_leases SET holder = NULL, session_pid = NULL, session_app = NULL, until = NULL, updated_at = now()
            WHERE name = 'watchdog' AND holder = $1`,
    values: [executorId],
  });
}
