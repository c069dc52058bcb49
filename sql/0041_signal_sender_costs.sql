-- stepd schema, part 41: what a signal's INSERT costs its sender (docs/performance.md, "Signals
-- at 1,000/s"). Measured there: the senders' backends took 1.5 of the machine's 2 cores at about
-- 500 signals/s, and the executor was left the rest. Two statements of part 36/39's wake-up
-- decision (run at commit) grew with the history of the signals table:
--
--   * "Did this transaction consume?" looked signal_consumptions up by signal id. In a sender's
--     long-lived session PL/pgSQL keeps one plan per statement, made while the table was young:
--     a scan of every consumption ever recorded (0.58 ms a signal in the bench, growing).
--     Now the matching statement trigger says so itself: it sets `stepd.signal_readied` to its
--     transaction's id when it readied a wait, and the decision reads that setting. A client may
--     set it too: its own transaction then only runs the check below (at worst one NOTIFY more).
--   * "Is another readied wait on its way?" bounded the recent consumptions by
--     `clock_timestamp() - 1 s`, which no index can use: with fewer than 20 consumptions in the
--     last second (any quiet hour) it read the whole index, every signal. And its join to the
--     steps was planned as a hash of every ready and running step. The bound is now computed once
--     (an index condition), and each of the at most 20 steps is probed by its primary key (a
--     subquery in the select list is never turned into a join).
--
-- Matching, consumption, locking and what is NOTIFYed when are unchanged.

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
  -- Part 36's matching, unchanged but for saying that it readied a wait.
  EXECUTE pg_catalog.replace($f$
    CREATE OR REPLACE FUNCTION @schema@.stepd_signals_ready_waits() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      sig record;
      readied pg_catalog.int8;
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
          WITH candidates AS (
            SELECT st.id, st.workflow_id, st.args FROM @schema@.workflow_steps st
             WHERE st.status = 'pending' AND st.tool IS NULL AND (st.args OPERATOR(pg_catalog.->) 'signal') IS NOT NULL
               AND ((st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->>) 'key') = sig.key
               AND ((st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->) 'names') OPERATOR(pg_catalog.?) sig.name
            UNION ALL
            SELECT st.id, st.workflow_id, st.args FROM @schema@.workflow_steps st
             WHERE st.status = 'pending' AND st.tool IS NULL AND (st.args OPERATOR(pg_catalog.->) 'signal') IS NOT NULL
               AND ((st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->>) 'key') IS NULL
               AND ((st.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->) 'names') OPERATOR(pg_catalog.?) sig.name
          ), waiting AS (
            SELECT DISTINCT ON (c.workflow_id) c.id
              FROM candidates c
             WHERE ((c.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->>) 'since')::pg_catalog.timestamptz <= sig.created_at
               AND EXISTS (SELECT 1 FROM @schema@.workflows w WHERE w.id = c.workflow_id AND w.status = 'running')
               AND NOT EXISTS (SELECT 1 FROM @schema@.signal_consumptions sc WHERE sc.workflow_id = c.workflow_id AND sc.signal_id = sig.id)
             ORDER BY c.workflow_id, c.id
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
          IF got > 0 THEN
            -- For the wake-up decided at commit (stepd_signals_wake_executors): this transaction readied a wait.
            PERFORM pg_catalog.set_config('stepd.signal_readied', pg_catalog.txid_current()::pg_catalog.text, true);
          END IF;
          EXIT WHEN got >= wanted;
        END LOOP;
      END LOOP;
      -- No NOTIFY here: the wake-up is decided at commit (stepd_signals_wake_executors, below).
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN NULL;
    EXCEPTION WHEN OTHERS THEN
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RAISE;
    END;
    $body$ $f$, '@schema@', s);

  body := $f$
    CREATE OR REPLACE FUNCTION @schema@.stepd_signals_wake_executors() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      tx pg_catalog.text := pg_catalog.txid_current()::pg_catalog.text;
      recent pg_catalog.timestamptz;
      fresh pg_catalog.timestamptz;
      now_ pg_catalog.timestamptz;
    BEGIN
      IF coalesce(pg_catalog.current_setting('stepd.signal_wakeup', true), '') = tx THEN
        RETURN NULL;
      END IF;
      -- Readied a wait in this transaction (set by stepd_signals_ready_waits): otherwise nothing to wake.
      IF coalesce(pg_catalog.current_setting('stepd.signal_readied', true), '') OPERATOR(pg_catalog.<>) tx THEN
        RETURN NULL;
      END IF;
      PERFORM pg_catalog.set_config('stepd.signal_wakeup', tx, true);
      -- Only a READ COMMITTED transaction sees the other waits as they are now: an older snapshot
      -- (REPEATABLE READ, SERIALIZABLE) may show a wait as ready that an executor took long ago.
      now_ := pg_catalog.clock_timestamp();
      recent := now_ OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => 1);
      fresh := now_ OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => 0.25);
      -- The newest consumptions of other transactions (created_at is their now(); ours is ours),
      -- each step probed by its key: on its way while ready and locked or updated by no one since
      -- the readying transaction (part 39), or claimed within the last 250 ms.
      IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' OR NOT EXISTS (
        SELECT 1 FROM (SELECT c.step_id FROM @schema@.signal_consumptions c
                        WHERE c.created_at > recent AND c.created_at OPERATOR(pg_catalog.<>) pg_catalog.now()
                        ORDER BY c.created_at DESC LIMIT 20) r
         WHERE (SELECT (st.status = 'ready' AND NOT st.gated AND st.ready_at <= now_
                        AND (st.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR st.xmax OPERATOR(pg_catalog.=) st.xmin))
                    OR (st.status = 'running' AND st.updated_at > fresh)
                  FROM @schema@.workflow_steps st WHERE st.id = r.step_id)) THEN
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', @literal@, 'table', 'workflow_steps', 'status', 'ready')::pg_catalog.text);
      END IF;
      RETURN NULL;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));
END;
$migration$;
