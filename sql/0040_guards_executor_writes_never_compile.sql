-- stepd schema, part 40: the guards that the executor's own writes never meet cost them nothing.
--
-- A row trigger's WHEN clause is compiled once per statement (for each table a statement writes),
-- whether or not it ever calls anything, and PostgreSQL inlines a SQL function such as
-- stepd_is_executor() there, parsing and analysing its body anew each time. The triggers of
-- parts 17 – 38 ask `NOT stepd_is_executor()`, and a chain's hop (finish a step, insert the
-- next) met six of them. This part runs after them all, so it rewrites every one. Measured with callgrind on a stand-alone backend, a hop took 5.0 M instructions,
-- 4.3 M with this part (docs/performance.md, "The chain hop").
--
--   1. Every trigger of this schema whose WHEN calls stepd_is_executor() gets the function's own
--      expression written in its place, as parts 4 and 6 wrote the first guards: the same test
--      (the setting and the role, read from the function as it is defined), evaluated the same
--      way, with nothing to inline. The function stays, for the queries and the functions that
--      call it.
--   2. The capacity guards (part 28) name their columns (`UPDATE OF`): an UPDATE whose SET list
--      names none of priority, gated, concurrency_key, concurrency_limit, rate_keys (key_held on
--      workflows) cannot change them, so the trigger is not even considered. Clients still meet
--      them exactly when they name one of those columns.
--
-- Names, timing, events, the functions the triggers run, and every other part of each WHEN stay as
-- they were; only where the test is written changes.

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.current_schema();
  call pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema()) || '.stepd_is_executor()';
  test pg_catalog.text;
  t record;
  def pg_catalog.text;
  path pg_catalog.text := pg_catalog.current_setting('search_path');
BEGIN
  -- Definitions printed with every name qualified (pg_get_triggerdef leaves out the search_path's).
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
  SELECT '(' || pg_catalog.regexp_replace(p.prosrc, '^\s*SELECT\s+', '', 'i') || ')' INTO STRICT test
    FROM pg_catalog.pg_proc p
   WHERE p.pronamespace = s::pg_catalog.regnamespace AND p.proname = 'stepd_is_executor' AND p.pronargs = 0;

  FOR t IN
    SELECT tg.tgname, c.relname, pg_catalog.pg_get_triggerdef(tg.oid) AS def
      FROM pg_catalog.pg_trigger tg JOIN pg_catalog.pg_class c ON c.oid = tg.tgrelid
     WHERE c.relnamespace = s::pg_catalog.regnamespace AND NOT tg.tgisinternal
       AND pg_catalog.strpos(pg_catalog.pg_get_triggerdef(tg.oid), call) > 0
     ORDER BY c.relname, tg.tgname
  LOOP
    def := pg_catalog.replace(t.def, call, test);
    IF t.tgname = 'workflow_steps_guard_capacity' THEN
      def := pg_catalog.replace(def, ' BEFORE UPDATE ON ', ' BEFORE UPDATE OF priority, gated, concurrency_key, concurrency_limit, rate_keys ON ');
    ELSIF t.tgname = 'workflows_guard_capacity' THEN
      def := pg_catalog.replace(def, ' BEFORE UPDATE ON ', ' BEFORE UPDATE OF priority, concurrency_key, concurrency_limit, key_held ON ');
    END IF;
    EXECUTE pg_catalog.format('DROP TRIGGER %I ON %I.%I', t.tgname, s, t.relname);
    EXECUTE def;
  END LOOP;
  PERFORM pg_catalog.set_config('search_path', path, true);
END;
$migration$;
