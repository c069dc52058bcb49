-- stepd schema, part 37: finish_tasks, the batch form of finish_task (docs/workers.md). A contract
-- addition; finish_task stays as it is.
--
--   finish_tasks(step_ids bigint[], tokens uuid[], results jsonb[]) RETURNS integer
--       Records several results at once: step_ids[i] held by tokens[i] is done with results[i]
--       (SQL NULL is stored as JSON null). 1 .. 1000 tasks, no step twice, the three arrays of
--       the same length. All or nothing: when any token is stale (55000, the same message and
--       DETAIL as finish_task names that step) or any result is above caps.resultBytes (54000),
--       the whole call is refused and nothing changes; the caller reports those tasks one by one
--       (finish_task) to learn which. Returns how many tasks it recorded (all of them).
--
-- Why: every worker step committed once on its own (finish_task), and those commits waited for
-- the WAL flush; a worker with several results ready shares one commit between them (the SDK
-- sends the results that became ready while its previous report was being written). The reports
-- wake the executors as finish_task's do (stepd_report_task, part 34): one NOTIFY at most per
-- call, only when no other report is on its way.
--
-- Rows are locked in step id order (stepd_task_held, FOR UPDATE), so two calls never wait for
-- each other in a circle. SECURITY DEFINER with a pinned search_path, EXECUTE for <schema>_worker
-- only (src/db/roles.ts); the internal stepd_report_tasks is not callable by PUBLIC.

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
  -- Several reports at once: stepd_report_task (part 34) for a set of steps, one wake-up check.
  body := $f$
    CREATE FUNCTION @schema@.stepd_report_tasks(p_step_ids pg_catalog.int8[], p_results pg_catalog.jsonb[])
    RETURNS pg_catalog.int4
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      n pg_catalog.int4;
    BEGIN
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      UPDATE @schema@.workflow_steps t
         SET status = 'ready', ready_at = coalesce(t.ready_at, pg_catalog.now()), updated_at = pg_catalog.now(),
             result = u.result, error = NULL, task_ended = 'finished'
        FROM ROWS FROM (pg_catalog.unnest(p_step_ids), pg_catalog.unnest(p_results)) AS u(id, result)
       WHERE t.id = u.id;
      GET DIAGNOSTICS n = ROW_COUNT;
      IF NOT EXISTS (SELECT 1 FROM @schema@.workflow_steps r
                      WHERE r.status IN ('ready', 'running') AND r.task_ended IS NOT NULL AND NOT r.gated
                        AND r.updated_at > pg_catalog.now() - CASE r.status WHEN 'ready' THEN pg_catalog.make_interval(secs => 1)
                                                                                       ELSE pg_catalog.make_interval(secs => 0.25) END
                        AND r.id OPERATOR(pg_catalog.<>) ALL (p_step_ids)) THEN
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', @literal@, 'table', 'workflow_steps', 'status', 'ready')::pg_catalog.text);
      END IF;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN n;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));

  body := $f$
    CREATE FUNCTION @schema@.finish_tasks(step_ids pg_catalog.int8[], tokens pg_catalog.uuid[], results pg_catalog.jsonb[])
    RETURNS pg_catalog.int4
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_variable
    DECLARE
      n pg_catalog.int4 := pg_catalog.cardinality(finish_tasks.step_ids);
      cap pg_catalog.int8;
      over pg_catalog.int8;
      item record;
      ids pg_catalog.int8[];
      values_ pg_catalog.jsonb[];
    BEGIN
      IF finish_tasks.step_ids IS NULL OR finish_tasks.tokens IS NULL OR finish_tasks.results IS NULL
         OR n < 1 OR n > 1000
         OR pg_catalog.array_ndims(finish_tasks.step_ids) <> 1 OR pg_catalog.array_ndims(finish_tasks.tokens) <> 1
         OR pg_catalog.array_ndims(finish_tasks.results) <> 1
         OR pg_catalog.cardinality(finish_tasks.tokens) <> n OR pg_catalog.cardinality(finish_tasks.results) <> n THEN
        RAISE EXCEPTION 'stepd: step_ids, tokens and results must be arrays of the same length, 1 to 1000'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF (SELECT pg_catalog.count(DISTINCT i) FROM pg_catalog.unnest(finish_tasks.step_ids) i) <> n THEN
        RAISE EXCEPTION 'stepd: a step may appear only once in finish_tasks'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT coalesce(c.result_bytes, 4194304) INTO cap FROM (SELECT 1) d LEFT JOIN @schema@.size_caps c ON c.id;
      ids := ARRAY[]::pg_catalog.int8[];
      values_ := ARRAY[]::pg_catalog.jsonb[];
      -- In step id order: the row locks of two calls never wait for each other in a circle.
      FOR item IN
        SELECT u.id, u.tok, coalesce(u.result, 'null'::pg_catalog.jsonb) AS result
          FROM ROWS FROM (pg_catalog.unnest(finish_tasks.step_ids), pg_catalog.unnest(finish_tasks.tokens),
                         pg_catalog.unnest(finish_tasks.results)) AS u(id, tok, result)
         ORDER BY u.id
      LOOP
        -- NULL id or token: 22023; stale: 55000 (the whole call is refused, nothing changes).
        PERFORM @schema@.stepd_task_held(item.id, item.tok, false);
        over := @schema@.stepd_json_bytes_above(item.result, cap);
        IF over IS NOT NULL THEN
          RAISE EXCEPTION 'stepd: the result of step % is % bytes as JSON, above caps.resultBytes (% bytes)', item.id, over, cap
            USING ERRCODE = 'program_limit_exceeded', DETAIL = pg_catalog.format('cap=caps.resultBytes limit=%s actual=%s', cap, over),
                  HINT = 'Store large values elsewhere and return a reference to them.';
        END IF;
        ids := pg_catalog.array_append(ids, item.id);
        values_ := pg_catalog.array_append(values_, item.result);
      END LOOP;
      RETURN @schema@.stepd_report_tasks(ids, values_);
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_report_tasks(pg_catalog.int8[], pg_catalog.jsonb[]),
       @schema@.finish_tasks(pg_catalog.int8[], pg_catalog.uuid[], pg_catalog.jsonb[]) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
