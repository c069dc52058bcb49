-- stepd schema, part 39: a signal's wake-up cannot be suppressed by a held row (docs/security.md,
-- "Notifications are hints"; test/security/wakeupSuppression.test.ts).
--
-- Part 36 skips a signal's NOTIFY when another signal wait is "on its way": readied by another
-- transaction within the last second and still ready. A client may take any step row FOR UPDATE
-- (its UPDATE grant on workflow_steps allows it), and claims skip locked rows. So a client that
-- readied one of its own waits and held that row from the instant its signal committed, renewing
-- it every few hundred milliseconds, made every other tenant's signal skip its NOTIFY and wait for
-- the executors' poll (measured: 3 s with a 3 s poll, ~1 s with the default; nothing else wakes
-- the executor once its lookout has gone quiet).
--
-- Now a ready wait counts as on its way only while its row version has been locked or updated by
-- no transaction but the one that readied it (xmax is 0 or its xmin; the readying transaction
-- locks its own new version). A row locked by a client, or by a claim still in
-- progress, does not count, and the signal NOTIFYs: at worst one NOTIFY more than part 36 sent,
-- never one fewer. Everything else of part 36 is unchanged.

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
      -- A ready wait counts only while no other transaction has locked its row since it was
      -- readied (xmax 0, or the readying transaction's own xid): a row someone holds (a client's SELECT ... FOR UPDATE, or a claim in progress)
      -- may never reach an executor's lookout, so this signal NOTIFYs (part 39).
      -- Only a READ COMMITTED transaction sees them as they are now: an older snapshot (REPEATABLE
      -- READ, SERIALIZABLE) may show a wait as ready that an executor took long ago: it NOTIFYs.
      IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' OR NOT EXISTS (
        SELECT 1 FROM (SELECT c.step_id FROM @schema@.signal_consumptions c
                        WHERE c.created_at > pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => 1)
                          AND c.created_at OPERATOR(pg_catalog.<>) pg_catalog.now()
                        ORDER BY c.created_at DESC LIMIT 20) r
          JOIN @schema@.workflow_steps st ON st.id = r.step_id
         WHERE (st.status = 'ready' AND NOT st.gated AND st.ready_at <= pg_catalog.clock_timestamp()
                AND (st.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR st.xmax OPERATOR(pg_catalog.=) st.xmin))
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
