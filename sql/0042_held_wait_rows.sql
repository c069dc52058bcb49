-- stepd schema, part 42: a wait row another transaction holds no longer blocks a signal
-- (docs/security.md, "Row locks a client holds"; docs/signals.md; test/security/
-- wakeupSuppression.test.ts and deferredSignalMatches.test.ts).
--
-- A signal's statement trigger (part 25, restated by 36 and 41) took every pending wait it
-- matched FOR UPDATE. Clients have column UPDATE grants on workflow_steps, so a client could take
-- ANOTHER tenant's pending wait row FOR UPDATE and keep it: every signal matching that wait (the
-- victim's INSERT, inside its own business transaction) then waited for as long as it liked.
--
-- Now the trigger locks the waits it readies with SKIP LOCKED. A wait it skipped (its row held by
-- another transaction: a client, a concurrent signal that readied it, the executor cancelling or
-- timing it out) is not lost: the (workflow, signal) pair is recorded in signal_deferred_matches,
-- in the signal's own transaction (a rolled-back signal records nothing), and the executor's
-- watchdog completes it once the row is free (stepd_ready_deferred_matches_of_running_workflows):
-- the workflow's first pending wait that matches the signal then, if the workflow still runs and
-- has not consumed that signal, is readied with it, as the trigger would have. A match that no
-- longer applies (the wait timed out or was readied by another signal, the workflow cancelled)
-- is dropped. What the trigger readies, consumes and NOTIFYs is otherwise unchanged: at most one
-- wait per workflow and signal, broadcast across workflows; a deferred match NOTIFYs nothing (the
-- executor that readies it later wakes the others itself).
--
-- Order: a workflow's deferred matches are a queue. While it has one, a later signal's match for
-- that workflow is deferred too (not readied over its head), and the executor completes them in
-- signal id order, stopping at one whose wait is still held: a workflow's waits receive its
-- signals in the order they were sent. The cost: those matches wait for the watchdog, and a held
-- wait holds up that workflow's later signals too (only that workflow's: the client's lock
-- delays the workflow whose row it holds, as every held row does).
--
-- The part-25 loop (a next round for a wait another transaction readied meanwhile) is gone: such a
-- wait was locked, so it is skipped, and its workflow's match is deferred like any other.

-- No client privilege (roles.ts grants clients nothing on a table it does not name). No foreign
-- key to workflows, as for signal_consumptions (part 25): checking it would lock the workflow row
-- from the sender's transaction. A deleted signal takes its deferred matches with it.
CREATE TABLE signal_deferred_matches (
  workflow_id  bigint NOT NULL,
  signal_id    bigint NOT NULL REFERENCES signals (id) ON DELETE CASCADE,
  -- The wait the signal found held (for the operator's eyes; the retry matches afresh).
  step_id      bigint NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  -- When an executor last found its wait held (NULL: never tried): held ones go to the back.
  tried_at     timestamptz,
  PRIMARY KEY (workflow_id, signal_id)
);
CREATE INDEX signal_deferred_matches_signal_idx ON signal_deferred_matches (signal_id);

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  -- Part 41's matching, but for SKIP LOCKED and the deferred matches.
  EXECUTE pg_catalog.replace($f$
    CREATE OR REPLACE FUNCTION @schema@.stepd_signals_ready_waits() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      sig record;
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
        -- Readies the first pending wait of every workflow that has not consumed the signal, unless
        -- its row is held by another transaction or the workflow has a deferred match already:
        -- then the match is deferred to the executor (signal_deferred_matches). Never waits for a row.
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
          SELECT DISTINCT ON (c.workflow_id) c.id, c.workflow_id,
                 EXISTS (SELECT 1 FROM @schema@.signal_deferred_matches d WHERE d.workflow_id = c.workflow_id) AS queued
            FROM candidates c
           WHERE ((c.args OPERATOR(pg_catalog.->) 'signal') OPERATOR(pg_catalog.->>) 'since')::pg_catalog.timestamptz <= sig.created_at
             AND EXISTS (SELECT 1 FROM @schema@.workflows w WHERE w.id = c.workflow_id AND w.status = 'running')
             AND NOT EXISTS (SELECT 1 FROM @schema@.signal_consumptions sc WHERE sc.workflow_id = c.workflow_id AND sc.signal_id = sig.id)
           ORDER BY c.workflow_id, c.id
        ), locked AS (
          -- Held rows are skipped, never waited for (a client may hold any step row).
          SELECT st.id FROM @schema@.workflow_steps st
           WHERE st.id IN (SELECT waiting.id FROM waiting WHERE NOT waiting.queued) AND st.status = 'pending'
           ORDER BY st.id FOR UPDATE SKIP LOCKED
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
        ), deferred AS (
          -- Runs to completion though nothing below reads it (a data-modifying WITH always does).
          INSERT INTO @schema@.signal_deferred_matches (workflow_id, signal_id, step_id)
          SELECT w.workflow_id, sig.id, w.id FROM waiting w
           WHERE NOT EXISTS (SELECT 1 FROM readied_rows r WHERE r.id = w.id)
        )
        SELECT pg_catalog.count(*) FROM consumed INTO got;
        IF got > 0 THEN
          -- For the wake-up decided at commit (stepd_signals_wake_executors): this transaction readied a wait.
          PERFORM pg_catalog.set_config('stepd.signal_readied', pg_catalog.txid_current()::pg_catalog.text, true);
        END IF;
      END LOOP;
      -- No NOTIFY here: the wake-up is decided at commit (stepd_signals_wake_executors).
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN NULL;
    EXCEPTION WHEN OTHERS THEN
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RAISE;
    END;
    $body$ $f$, '@schema@', s);

  -- The executor's side: completes deferred matches whose wait row is free now. Runs with the
  -- caller's rights (the executor's: its session may ready signal waits); granted to it alone
  -- (roles.ts). A workflow's deferred matches are a queue in signal id order: only its first is
  -- taken (FOR UPDATE SKIP LOCKED: two executors never work on one workflow's queue at once, and
  -- neither waits for the other), then the next, until one meets a held row. Each, as the
  -- trigger would for that one workflow now:
  --   * the signal gone (retention), the workflow not running, the signal consumed by it, or no
  --     pending wait of it matching the signal (name, key, since at or before the signal): dropped;
  --   * that wait's row still held (SKIP LOCKED): kept, with the rest of the workflow's queue, and
  --     tried_at set, so queues never tried come first and held ones take turns (however many
  --     rows a client holds, a match it does not hold is tried at the next sweep);
  --   * else the wait is readied with the signal and the consumption recorded, the match dropped.
  -- At most `batch` workflows' queues and `batch` matches a call. Returns how many waits it readied.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_ready_deferred_matches_of_running_workflows(batch pg_catalog.int4) RETURNS pg_catalog.int4
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      head record;
      wf pg_catalog.int8;
      sid pg_catalog.int8;
      sig record;
      wait_id pg_catalog.int8;
      consumed_by pg_catalog.int8;
      done pg_catalog.int4 := 0;
      readied pg_catalog.int4 := 0;
    BEGIN
      FOR head IN SELECT m.workflow_id, m.signal_id FROM @schema@.signal_deferred_matches m
                   WHERE NOT EXISTS (SELECT 1 FROM @schema@.signal_deferred_matches e
                                      WHERE e.workflow_id = m.workflow_id AND e.signal_id < m.signal_id)
                   ORDER BY m.tried_at NULLS FIRST, m.signal_id LIMIT batch FOR UPDATE SKIP LOCKED LOOP
        wf := head.workflow_id;
        sid := head.signal_id;
        LOOP
          EXIT WHEN sid IS NULL OR done >= batch;
          SELECT g.id, g.name, g.key, g.payload, g.created_at, g.created_role INTO sig
            FROM @schema@.signals g WHERE g.id = sid;
          wait_id := NULL;
          consumed_by := NULL;
          IF FOUND THEN
            SELECT st.id INTO wait_id FROM @schema@.workflow_steps st
             WHERE st.workflow_id = wf AND st.status = 'pending' AND st.tool IS NULL
               AND (st.args -> 'signal') IS NOT NULL
               AND (st.args -> 'signal' ->> 'key' IS NULL OR st.args -> 'signal' ->> 'key' = sig.key)
               AND (st.args -> 'signal' -> 'names') ? sig.name
               AND (st.args -> 'signal' ->> 'since')::timestamptz <= sig.created_at
               AND EXISTS (SELECT 1 FROM @schema@.workflows w WHERE w.id = wf AND w.status = 'running')
               AND NOT EXISTS (SELECT 1 FROM @schema@.signal_consumptions c WHERE c.workflow_id = wf AND c.signal_id = sig.id)
             ORDER BY st.id LIMIT 1;
            IF wait_id IS NOT NULL THEN
              PERFORM 1 FROM @schema@.workflow_steps st WHERE st.id = wait_id AND st.status = 'pending' FOR UPDATE SKIP LOCKED;
              IF NOT FOUND THEN
                -- Still held (or changed since): this queue waits for a later sweep, at the back.
                UPDATE @schema@.signal_deferred_matches m SET tried_at = clock_timestamp()
                 WHERE m.workflow_id = wf AND m.signal_id = sid;
                EXIT;
              END IF;
              INSERT INTO @schema@.signal_consumptions (workflow_id, signal_id, step_id)
              VALUES (wf, sig.id, wait_id) ON CONFLICT DO NOTHING
              RETURNING step_id INTO consumed_by;
              IF consumed_by IS NOT NULL THEN
                UPDATE @schema@.workflow_steps st
                   SET status = 'ready', ready_at = now(), updated_at = now(), readied_at = now(), readied_role = sig.created_role,
                       result = jsonb_build_object('id', sig.id::text, 'name', sig.name, 'key', sig.key,
                                                   'payload', sig.payload, 'at', sig.created_at, 'role', sig.created_role)
                 WHERE st.id = wait_id;
                readied := readied + 1;
              END IF;
            END IF;
          END IF;
          DELETE FROM @schema@.signal_deferred_matches m WHERE m.workflow_id = wf AND m.signal_id = sid;
          done := done + 1;
          -- The workflow's next deferred match, if any (its queue is this call's while the head was locked).
          sid := NULL;
          SELECT m.signal_id INTO sid FROM @schema@.signal_deferred_matches m
           WHERE m.workflow_id = wf ORDER BY m.signal_id LIMIT 1 FOR UPDATE SKIP LOCKED;
        END LOOP;
        EXIT WHEN done >= batch;
      END LOOP;
      RETURN readied;
    END;
    $body$ $f$, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_ready_deferred_matches_of_running_workflows(pg_catalog.int4) FROM PUBLIC', '@schema@', s);
END;
$migration$;
