-- stepd schema, part 45: readied signal waits are no longer claimed. The executor's outcome lane
-- records each straight from `ready` in the transaction that starts its next step (one
-- transaction instead of a claim and then the outcome; src/executor/claims/signalPickup.ts).
--
-- The commit-time wake-up decision (part 36, 39, 41) counted a wait "on its way" while it was
-- ready, or claimed (`running`) within the last 250 ms: the executor that took it is still
-- looking for more, so the signal need not NOTIFY. A wait recorded straight from ready is never
-- `running`; it is `done` within the last 250 ms instead, and counts the same way. Without this,
-- every signal that came just after a batch was recorded would NOTIFY, and notifying commits run
-- one at a time across the server.
--
-- Everything else is part 41's.

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
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
      -- the readying transaction (part 39), or taken within the last 250 ms: claimed (an older
      -- executor) or recorded straight from ready (part 45); that executor is still looking.
      -- A signal wait is done only by an executor: a client cannot make this hold.
      IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' OR NOT EXISTS (
        SELECT 1 FROM (SELECT c.step_id FROM @schema@.signal_consumptions c
                        WHERE c.created_at > recent AND c.created_at OPERATOR(pg_catalog.<>) pg_catalog.now()
                        ORDER BY c.created_at DESC LIMIT 20) r
         WHERE (SELECT (st.status = 'ready' AND NOT st.gated AND st.ready_at <= now_
                        AND (st.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR st.xmax OPERATOR(pg_catalog.=) st.xmin))
                    OR (st.status IN ('running', 'done') AND st.updated_at > fresh)
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
