-- stepd schema, part 18: the executors' locks as rows clients cannot touch (docs/security.md).
--
-- Until now the executors coordinated through advisory locks whose keys were derived from known
-- strings (`stepd.claim-limits:<schema>`, `stepd.watchdog:<schema>`,
-- `stepd.executor:<schema>:<id>`). PostgreSQL lets every role that can connect take any advisory
-- lock, so a client that took one first could stop limited claims, keep every executor from
-- leading the watchdog, or keep a daemon from starting. Each is now a row of executor_leases, a
-- table the executor role may write and clients may not even read (the migrator grants
-- <schema>_executor every stepd table; <schema>_client gets only the SQL contract's grants, and
-- this table is not part of it). Locking a row (SELECT … FOR UPDATE, INSERT … ON CONFLICT DO
-- UPDATE) needs UPDATE on it, and LOCK TABLE needs a privilege too, so a client can neither hold
-- these rows nor wait in their queue.
--
--   claim-limits     one row, locked for the transaction of every limited claim (the counted
--                    claim of src/tools/limits.ts), so each counts the others' claims.
--   watchdog         one row: the executor leading the watchdog (holder), its listener session
--                    (session_pid, session_app) and until when its lease runs. The leader renews
--                    it at every sweep; another executor takes it once it has expired or the
--                    leader's session has ended (a killed leader's connection closes at once; a
--                    PostgreSQL restart ends every session).
--   executor:<id>    one row per executor id in use: a random token of the process that claimed
--                    it (holder) and its listener session. Another process may claim the id only
--                    once that session has ended, so a second executor with the same id refuses
--                    to start while a restarted one (after a crash) starts at once. Deleted on a
--                    clean stop; rows of ended sessions are forgotten by the watchdog's leader.
--
-- A session counts as alive (stepd_executor_session_alive) when a backend with that pid still
-- runs with the recorded application_name and its login role is trusted (stepd_role_is_trusted:
-- a member of <schema>_executor or of the tables' owner). pid, application_name and the role of
-- every session are visible to every role; a client can set any application_name but cannot
-- pick its pid nor log in as a trusted role, so it cannot make a dead holder look alive.

CREATE TABLE executor_leases (
  name        text PRIMARY KEY,
  holder      text,
  session_pid integer,
  session_app text,
  until       timestamptz,
  updated_at  timestamptz NOT NULL DEFAULT now(),

  CONSTRAINT executor_leases_known_name CHECK (name IN ('claim-limits', 'watchdog') OR name LIKE 'executor:_%')
);

INSERT INTO executor_leases (name) VALUES ('claim-limits'), ('watchdog');

-- Nobody but the owner and the roles the migrator grants (the executor role) may use it.
REVOKE ALL ON executor_leases FROM PUBLIC;

DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  -- The schema is baked in, so another session's search_path cannot change what it checks.
  EXECUTE format($f$
    CREATE FUNCTION %1$I.stepd_executor_session_alive(session_pid integer, session_app text) RETURNS boolean
    LANGUAGE sql STABLE AS $body$
      SELECT session_pid IS NOT NULL AND EXISTS (
        SELECT 1 FROM pg_catalog.pg_stat_get_activity(session_pid) a
         WHERE a.pid = session_pid
           AND a.application_name IS NOT DISTINCT FROM session_app
           AND %1$I.stepd_role_is_trusted(pg_catalog.pg_get_userbyid(a.usesysid)::text))
    $body$ $f$, s);
END;
$migration$;
