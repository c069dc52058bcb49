-- stepd schema, part 43: a deferred signal match is tried within milliseconds, not at the next
-- sweep (docs/signals.md, "When a wait's row is held").
--
-- Part 42 made a signal skip a wait row another transaction holds and defer the match, which the
-- watchdog's leader completes at its next sweep (2 s by default). Most such rows are held only
-- for a moment: by another signal's transaction that readied the same workflow's wait and has not
-- committed yet, or by a transition of that workflow. And while a workflow has a deferred match,
-- its later signals queue behind it, so one race made a stream of signals to a loop wait a sweep.
--
-- Now a transaction that deferred a match NOTIFYs `stepd_wakeup` at its commit (once, however many
-- it deferred), and an executor that hears it tries the deferred matches soon, backing off while
-- they stay held (src/executor/wakeups/deferredSignalRetry.ts); the sweep stays the backstop. A
-- rolled-back signal defers and NOTIFYs nothing. The retry pass moves a held match to the back
-- with an UPDATE, which NOTIFYs nothing: no loop. A client whose signals defer against a row it
-- holds itself pays the NOTIFY in its own commits; an executor tries at most a few times per
-- burst of hints (the backoff).

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
  body := $f$
    CREATE FUNCTION @schema@.stepd_deferred_matches_wake_executors() RETURNS trigger
    LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      tx pg_catalog.text := pg_catalog.txid_current()::pg_catalog.text;
    BEGIN
      IF coalesce(pg_catalog.current_setting('stepd.deferred_wakeup', true), '') = tx THEN
        RETURN NULL;
      END IF;
      PERFORM pg_catalog.set_config('stepd.deferred_wakeup', tx, true);
      PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
        'schema', @literal@, 'table', 'signal_deferred_matches', 'status', 'deferred')::pg_catalog.text);
      RETURN NULL;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));
  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_deferred_matches_wake_executors() FROM PUBLIC', '@schema@', s);
END;
$migration$;

CREATE CONSTRAINT TRIGGER signal_deferred_matches_wake_executors
  AFTER INSERT ON signal_deferred_matches
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION stepd_deferred_matches_wake_executors();
