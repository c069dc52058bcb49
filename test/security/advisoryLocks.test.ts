/**
 * Advisory locks from an attacker's side. PostgreSQL lets every role that can connect take any
 * advisory lock, and the keys stepd uses are derived from known strings
 * (`stepd.watchdog:<schema>`, `stepd.claim-limits:<schema>`, `stepd.executor:<schema>:<id>`, the
 * id defaulting to the host name), so a client that takes one first decides what the executors
 * can do. These attacks work today (each verified by hand with a client role of the suite); each
 * `it.todo` below says what it does and the fix, which needs DDL (locks clients cannot take).
 */
import { describe, it } from 'vitest';

describe('advisory locks held by a client', () => {
  it.todo(
    'a client holding `stepd.claim-limits:<schema>` (pg_advisory_lock(hashtextextended(...))) cannot stop limited claims: today, ' +
      'with any `limits` configured, every claim waits for that lock forever, so no tool step of anyone runs (verified: a one-step ' +
      'core.echo workflow never completed while a client session held it). Fix: take the claims lock as a row lock on a table only ' +
      '<schema>_executor may lock (SELECT … FOR UPDATE needs UPDATE privilege, which clients lack), e.g. a one-row `executor_locks` table',
  );

  it.todo(
    'a client holding `stepd.watchdog:<schema>` before the executors start (or while the leader reconnects) cannot stop the ' +
      "watchdog: today no executor ever becomes leader, so gate timeouts, workflow deadlines, expired leases and dead executors' " +
      'steps are never handled. Fix: leadership as a lease row in a table clients cannot write (UPDATE … SET leader, until ' +
      'WHERE until < now() OR leader = me), not an advisory lock',
  );

  it.todo(
    "a client holding `stepd.executor:<schema>:<hostname>` cannot stop the daemon from starting: today Executor.start() fails with " +
      'ExecutorIdInUseError (the id defaults to os.hostname(), and application_name `stepd-executor:<id>` is visible in ' +
      'pg_stat_activity). Fix: the identity claim as a row in the executors table (executor-only), or a random id suffix',
  );

  it.todo(
    "a client holding `stepd.migrate` (one key for every schema of the database) cannot stop `stepd start` or `stepd migrate`: " +
      'today migrate() takes pg_advisory_xact_lock(hashtextextended(\'stepd.migrate\', 0)) before it even reads the log, so the ' +
      'daemon waits at start-up for as long as the client holds it (src/db/migrate.ts; read from the code, not run). Fix: read the ' +
      'log first and lock only when something is pending, with a lock_timeout and a message naming the holder (pg_locks)',
  );
});
