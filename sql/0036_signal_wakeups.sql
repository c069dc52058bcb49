-- stepd schema, part 36: a signal's wake-up (docs/signals.md, docs/performance.md "Signals").
--
-- Part 25 had every signal that readied a wait NOTIFY `stepd_wakeup` from its statement trigger.
-- Every transaction that NOTIFYs takes PostgreSQL's notification queue lock at commit and keeps it
-- through its WAL flush, so notifying commits run one at a time, cluster-wide (part 34 says the
-- same of worker reports). Measured at 1,000 signals/s against 10,000 waits: three quarters of
-- each sender's INSERT was spent waiting for that lock (`Lock: object`), about 8 ms an INSERT,
-- against 1.4 ms of matching and 0.6 ms of commit alone.
--
-- Now the matching stays where it was (the statement trigger, in the inserting transaction:
-- nothing about what is matched, consumed or locked changes), and the NOTIFY is decided at
-- commit, by a deferred constraint trigger, once per transaction that readied a wait:
--
--   it NOTIFYs unless another signal wait is already on its way to an executor: one readied by a
--   signal, or matched at its creation, within the last second and still ready (its own wake-up
--   went out, or an earlier one's did, down to the first, which NOTIFYed), or one an executor
--   claimed within the last 250 ms. An executor that claims readied signal waits looks for more
--   10 ms later, backing off, until 500 ms pass without one (src/executor/claims/reportLookout.ts,
--   as for worker reports), which finds this one: the decision is taken just before the commit
--   (not at the INSERT, which may be followed by any amount of the sender's own work), so this
--   transaction's commit lands within that lookout unless its own WAL flush takes longer than
--   about 250 ms (then, and if the executor that took the other wait dies, the executors' poll
--   is the backstop).
--
--   A transaction in REPEATABLE READ or SERIALIZABLE always NOTIFYs (its snapshot may be old).
--
--   What a client can do to it: only delay its own signal's wake-up to that lookout or the poll
--   (SET CONSTRAINTS ... IMMEDIATE moves the decision to the INSERT; `stepd.signal_wakeup` is a
--   setting it can write). Matching, consumption and the no-missed-match rule do not depend on it.
--   A rolled-back insert readies and wakes nothing, as before.
--
-- The payload no longer names a step (no executor reads it: wakeupHint.ts), a constant one.

-- Recent consumptions, newest first: the "on its way" check reads the last second's.
CREATE INDEX signal_consumptions_created_idx ON signal_consumptions (created_at);

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
  -- Part 25's matching, unchanged but for its NOTIFY.
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

  -- At commit (deferred), for each signal of the transaction until one decides: did it ready a
  -- wait, and is none on its way already? The decision is kept for the transaction in
  -- stepd.signal_wakeup (its txid), so a large INSERT decides once.
  body := $f$
    CREATE FUNCTION @schema@.stepd_signals_wake_executors() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      tx pg_catalog.text := pg_catalog.txid_current()::pg_catalog.text;
    BEGIN
      IF coalesce(pg_catalog.current_setting('stepd.signal_wakeup', true), '') = tx THEN
        RETURN NULL;
      END IF;
      -- Consumed only in this transaction: the signal is not visible to any other before it commits.
      IF NOT EXISTS (SELECT 1 FROM @schema@.signal_consumptions c WHERE c.signal_id = NEW.id) THEN
        RETURN NULL;
      END IF;
      PERFORM pg_catalog.set_config('stepd.signal_wakeup', tx, true);
      -- The newest consumptions of other transactions (created_at is their now(); ours is ours).
      -- Only a READ COMMITTED transaction sees them as they are now: an older snapshot (REPEATABLE
      -- READ, SERIALIZABLE) may show a wait as ready that an executor took long ago: it NOTIFYs.
      IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' OR NOT EXISTS (
        SELECT 1 FROM (SELECT c.step_id FROM @schema@.signal_consumptions c
                        WHERE c.created_at > pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => 1)
                          AND c.created_at OPERATOR(pg_catalog.<>) pg_catalog.now()
                        ORDER BY c.created_at DESC LIMIT 20) r
          JOIN @schema@.workflow_steps st ON st.id = r.step_id
         WHERE (st.status = 'ready' AND NOT st.gated AND st.ready_at <= pg_catalog.clock_timestamp())
            OR (st.status = 'running' AND st.updated_at > pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => 0.25))) THEN
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', @literal@, 'table', 'workflow_steps', 'status', 'ready')::pg_catalog.text);
      END IF;
      RETURN NULL;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_signals_wake_executors() FROM PUBLIC', '@schema@', s);
END;
$migration$;

CREATE CONSTRAINT TRIGGER signals_wake_executors
  AFTER INSERT ON signals
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION stepd_signals_wake_executors();
