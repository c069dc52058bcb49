-- stepd schema, part 46: a deferred signal match is never completed for a workflow whose cancel
-- is on its way.
--
-- Part 44's retry read the workflow's status without a lock and then took the wait row FOR UPDATE
-- SKIP LOCKED. A cancel updates the workflow row first and then cancels its steps; when a client
-- held the wait row, the cancel queued on it. A row lock freed by its holder goes to whoever
-- takes it first, not to the session queued for it, so the retry could take the wait row from
-- under the queued cancel, still see the workflow `running` (the cancel was not committed) and
-- consume the signal for a workflow that then ended `cancelled`. Now, with the wait row locked,
-- the retry also takes the workflow row FOR SHARE SKIP LOCKED: a workflow row being changed sends
-- the match to the back of the queue, and the next try sees the cancel committed and drops it.
-- Both locks are taken without waiting, so the opposite order to a cancel's cannot deadlock.
--
-- Everything else is part 44's.

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  EXECUTE pg_catalog.replace($f$
    CREATE OR REPLACE FUNCTION @schema@.stepd_ready_deferred_matches_of_running_workflows(batch pg_catalog.int4) RETURNS pg_catalog.int4
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
      -- Each workflow's first match, found by skipping through the primary key one workflow at a
      -- time: as many probes as workflows with a queue, however long a queue is.
      FOR head IN WITH RECURSIVE heads(workflow_id, signal_id, tried_at) AS (
                    (SELECT m.workflow_id, m.signal_id, m.tried_at FROM @schema@.signal_deferred_matches m
                      ORDER BY m.workflow_id, m.signal_id LIMIT 1)
                    UNION ALL
                    SELECT n.workflow_id, n.signal_id, n.tried_at FROM heads h,
                           LATERAL (SELECT m.workflow_id, m.signal_id, m.tried_at FROM @schema@.signal_deferred_matches m
                                     WHERE m.workflow_id > h.workflow_id
                                     ORDER BY m.workflow_id, m.signal_id LIMIT 1) n)
                  SELECT h.workflow_id, h.signal_id FROM heads h
                   ORDER BY h.tried_at NULLS FIRST, h.signal_id LIMIT batch LOOP
        -- Locked by its key as it is taken: one another executor is working on (or has just
        -- completed) is skipped, as part 42's SKIP LOCKED did.
        PERFORM 1 FROM @schema@.signal_deferred_matches m
          WHERE m.workflow_id = head.workflow_id AND m.signal_id = head.signal_id FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
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
              IF FOUND THEN
                -- Then the workflow row, without waiting: a cancel (or any change) of the workflow
                -- not yet committed holds it, and may be queued on the wait row this call just
                -- took from under it (a row lock freed by its holder goes to whoever locks it
                -- first). The match is tried again once the workflow's status is known.
                PERFORM 1 FROM @schema@.workflows w WHERE w.id = wf AND w.status = 'running' FOR SHARE SKIP LOCKED;
              END IF;
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
END;
$migration$;
