-- stepd schema, part 25: steps that wait for a signal (docs/signals.md, docs/flow-language.md).
--
-- A waiting `signal` step is a workflow_steps row with tool NULL, status 'pending' and
--   args = {"signal": {"names": [...], "key": "order-42" | null, "since": "<timestamptz>"}}
-- (expires_at: its timeout). It is matched in the database, in the transaction that makes the
-- match possible, from either side:
--   a signal is inserted   the statement trigger signals_ready_waits readies, for each new signal
--                          (in id order), one pending wait of every running workflow whose names
--                          hold its name, whose key is NULL or equal to its key, whose since is at
--                          or before its created_at, and which has not consumed it: broadcast
--                          across workflows, at most once per workflow. result = {"id", "name",
--                          "key", "payload", "at", "role"} (id as text, at its created_at).
--   a wait is created      the executor, in the transaction that inserts the row, readies it at
--                          once with the oldest matching signal the workflow has not consumed
--                          (src/db/queries/signalWaits.ts).
--   consumption            signal_consumptions (workflow_id, signal_id) PRIMARY KEY: a loop's next
--                          wait gets the next signal; one row per readied step (step_id UNIQUE).
--   no missed wake-up      the two sides serialize on rows of signal_wait_locks, a bucket per
--                          signal name and one per (name, key): a signal takes FOR SHARE on its
--                          name's and its key's buckets (signals never wait for each other), the
--                          executor UPDATEs the bucket of the wait's key (or of its name, for a
--                          wait without key) before it looks for signals. Whichever commits
--                          second sees the other's row in its next statement (READ COMMITTED).
--                          A client inserting in REPEATABLE READ or SERIALIZABLE, whose snapshot
--                          predates a wait created meanwhile, gets 40001 (the executor's UPDATE
--                          made a new row version) and retries: never a missed match.
--                          Clients hold no privilege on signal_wait_locks (nor on
--                          signal_consumptions): a client can hold a bucket only through a signal
--                          insert it leaves uncommitted, which delays only the creation of waits
--                          on names sharing that bucket (docs/security.md).
--   no forged readying     clients ready pending gates by UPDATE; a pending signal wait refuses it
--                          (42501: send the signal instead).

CREATE TABLE signal_wait_locks (
  bucket  integer PRIMARY KEY,
  waits   bigint NOT NULL DEFAULT 0
);
INSERT INTO signal_wait_locks (bucket) SELECT pg_catalog.generate_series(0, 1023);

-- The bucket of a signal name (key NULL) or of a (name, key) pair. Names and keys hold no control
-- characters (sql/0024), so U+001F cannot be part of either.
CREATE FUNCTION stepd_signal_bucket(name text, key text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN key IS NULL THEN pg_catalog.hashtext('n' || name) & 1023
              ELSE pg_catalog.hashtext('k' || name || E'\x1f' || key) & 1023 END
$$;

CREATE TABLE signal_consumptions (
  workflow_id  bigint NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
  signal_id    bigint NOT NULL REFERENCES signals (id) ON DELETE CASCADE,
  step_id      bigint NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, signal_id)
);
CREATE INDEX signal_consumptions_signal_idx ON signal_consumptions (signal_id);

-- Pending signal waits by what they wait for (@> on names and key).
CREATE INDEX workflow_steps_signal_waits_idx ON workflow_steps USING gin ((args -> 'signal') jsonb_path_ops)
  WHERE status = 'pending' AND tool IS NULL;

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_signals_ready_waits() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      sig record;
      readied pg_catalog.int8;
      first_readied pg_catalog.int8;
      wanted pg_catalog.int8;
      got pg_catalog.int8;
    BEGIN
      -- Every bucket this statement's signals may match a wait in, locked in order: a wait being
      -- created now either committed before (seen below) or waits for this transaction to end.
      PERFORM 1 FROM @schema@.signal_wait_locks l
        WHERE l.bucket IN (SELECT @schema@.stepd_signal_bucket(a.name, NULL) FROM added a
                           UNION SELECT @schema@.stepd_signal_bucket(a.name, a.key) FROM added a WHERE a.key IS NOT NULL)
        ORDER BY l.bucket FOR SHARE;
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      FOR sig IN SELECT a.id, a.name, a.key, a.payload, a.created_at, a.created_role FROM added a ORDER BY a.id LOOP
        -- Each round readies the first pending wait of every workflow that has not consumed the
        -- signal; a wait that another transaction readied meanwhile (a concurrent signal) leaves
        -- its workflow for the next round, which sees that change and takes its next wait.
        FOR round IN 1..10000 LOOP
          WITH waiting AS (
            SELECT DISTINCT ON (st.workflow_id) st.id
              FROM @schema@.workflow_steps st
             WHERE st.status = 'pending' AND st.tool IS NULL
               AND ((st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.@>) pg_catalog.jsonb_build_object('names', pg_catalog.jsonb_build_array(sig.name), 'key', sig.key)
                    OR (st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.@>) pg_catalog.jsonb_build_object('names', pg_catalog.jsonb_build_array(sig.name), 'key', NULL))
               AND ((st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->>) 'since')::pg_catalog.timestamptz <= sig.created_at
               AND EXISTS (SELECT 1 FROM @schema@.workflows w WHERE w.id = st.workflow_id AND w.status = 'running')
               AND NOT EXISTS (SELECT 1 FROM @schema@.signal_consumptions c WHERE c.workflow_id = st.workflow_id AND c.signal_id = sig.id)
             ORDER BY st.workflow_id, st.id
          ), locked AS (
            -- In step id order, so that two signals' transactions never wait for each other in a circle.
            SELECT st.id FROM @schema@.workflow_steps st
             WHERE st.id IN (SELECT waiting.id FROM waiting) AND st.status = 'pending'
             ORDER BY st.id FOR UPDATE
          ), readied_rows AS (
            UPDATE @schema@.workflow_steps st
               SET status = 'ready', ready_at = pg_catalog.now(), updated_at = pg_catalog.now(),
                   readied_at = pg_catalog.now(), readied_role = session_user,
                   result = pg_catalog.jsonb_build_object('id', sig.id::pg_catalog.text, 'name', sig.name, 'key', sig.key,
                                                          'payload', sig.payload, 'at', sig.created_at, 'role', sig.created_role)
              FROM locked
             WHERE st.id = locked.id AND st.status = 'pending'
            RETURNING st.id, st.workflow_id
          ), consumed AS (
            INSERT INTO @schema@.signal_consumptions (workflow_id, signal_id, step_id)
            SELECT r.workflow_id, sig.id, r.id FROM readied_rows r
            RETURNING step_id
          )
          SELECT (SELECT pg_catalog.count(*) FROM waiting), (SELECT pg_catalog.count(*) FROM consumed), (SELECT pg_catalog.min(c.step_id) FROM consumed c)
            INTO wanted, got, readied;
          first_readied := coalesce(first_readied, readied);
          EXIT WHEN got >= wanted;
        END LOOP;
      END LOOP;
      IF first_readied IS NOT NULL THEN
        -- One hint for the statement: a claim looks for every ready step.
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', TG_TABLE_SCHEMA, 'table', 'workflow_steps', 'id', first_readied, 'status', 'ready')::pg_catalog.text);
      END IF;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN NULL;
    EXCEPTION WHEN OTHERS THEN
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RAISE;
    END;
    $body$ $f$, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_signals_ready_waits() FROM PUBLIC', '@schema@', s);
END;
$migration$;

CREATE TRIGGER signals_ready_waits
  AFTER INSERT ON signals
  REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION stepd_signals_ready_waits();

-- A signal wait completes with a signal, never by a client's UPDATE (that would forge one).
CREATE FUNCTION stepd_guard_signal_wait() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'stepd: step % waits for a signal; it completes when a matching signal is inserted and cannot be readied by hand', OLD.id
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'INSERT INTO signals (name, key, payload) VALUES (...) with the name and key the step waits for.';
END;
$$;

CREATE TRIGGER workflow_steps_guard_signal_wait
  BEFORE UPDATE OF status, result ON workflow_steps
  FOR EACH ROW WHEN (OLD.status = 'pending' AND OLD.tool IS NULL AND NEW.status IS DISTINCT FROM 'cancelled'
                     AND (OLD.args -> 'signal') IS NOT NULL AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_guard_signal_wait();
