-- stepd schema, part 41: every transaction that readies a signal wait NOTIFYs as it commits.
--
-- Part 36 skipped a signal's NOTIFY while another signal wait was "on its way" (part 39 narrowed
-- "on its way"), leaving the executor's lookout to find it. The senders stopped queueing on
-- PostgreSQL's notification lock, but the workflows waited longer: at 1,000 signals/s against
-- 10,000 waits, side by side with a build that NOTIFYed every time (the builds alternating, a
-- quiet machine), signal → next step running p50 190 against 75 ms, p99 561 against 125 ms; the
-- waits were claimed as fast, their outcomes recorded later (docs/performance.md, "Signals at
-- 1,000/s"). The wake-up is what a waiting workflow pays for, so it comes first: the decision is
-- still made by the deferred constraint trigger of part 36, once per transaction, at commit, and
-- only for a transaction that readied (consumed a signal into) a wait; it no longer skips.
--
-- What a client controls: only its own transaction's wake-up (`SET CONSTRAINTS … IMMEDIATE` moves
-- it to the INSERT; `stepd.signal_wakeup` set to its own transaction id skips it). No other
-- session's signal depends on its rows any more, so holding rows suppresses nothing.

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
      -- Once per transaction.
      IF coalesce(pg_catalog.current_setting('stepd.signal_wakeup', true), '') = tx THEN
        RETURN NULL;
      END IF;
      -- Only a signal this transaction consumed into a wait wakes anyone.
      IF NOT EXISTS (SELECT 1 FROM @schema@.signal_consumptions c WHERE c.signal_id = NEW.id) THEN
        RETURN NULL;
      END IF;
      PERFORM pg_catalog.set_config('stepd.signal_wakeup', tx, true);
      PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
        'schema', @literal@, 'table', 'workflow_steps', 'status', 'ready')::pg_catalog.text);
      RETURN NULL;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_signals_wake_executors() FROM PUBLIC', '@schema@', s);
END;
$migration$;
