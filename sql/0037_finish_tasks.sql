-- stepd schema, part 37: finish_tasks, the batch form of finish_task (docs/workers.md), a contract
-- addition (finish_task stays as it is); and take_tasks locks its picks by the primary key.
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
-- take_tasks (CREATE OR REPLACE: signature, owner, grants, SECURITY DEFINER and search_path kept;
-- what it promises unchanged): part 34's generic plan read the whole waiting-tasks index to lock
-- the few ids it had picked, at every call: a take cost 10 – 20 ms beside 10,000 waiting tasks,
-- most of the workers' database time (pg_stat_user_functions during the bench: 4.3 ms a call on
-- average over a run). Its lock statement now names only conditions that no partial index
-- covers, so the ids are found by the primary key.
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

  -- take_tasks as in part 34, but its lock statement finds the ids by the primary key (below).
  body := $f$
    CREATE OR REPLACE FUNCTION @schema@.take_tasks(tools pg_catalog.text[], max pg_catalog.int4, lease pg_catalog.interval)
    RETURNS TABLE (step_id pg_catalog.int8, token pg_catalog.uuid, tool pg_catalog.text, args pg_catalog.jsonb,
                   workflow_id pg_catalog.int8, attempt pg_catalog.int4, "user" pg_catalog.text,
                   idempotency_key pg_catalog.text, deadline pg_catalog.timestamptz)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    -- Index scans only, as the executor's claims (src/db/connect.ts, BEGIN_PREFERRING_INDEX_SCANS):
    -- planned with statistics from before a burst, the walk over workflows read the table whole
    -- at every step (about a second a call beside 2,000 waiting tasks).
    -- A generic plan, made once per session (part 34): custom plans for its parameters were
    -- planned again at every call, 8 ms of planning for a take whose execution takes 1 – 7.
    SET enable_seqscan = off SET enable_bitmapscan = off SET plan_cache_mode = force_generic_plan AS $body$
    #variable_conflict use_column
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      likes pg_catalog.text[];
      held pg_catalog.interval := @schema@.stepd_task_lease(take_tasks.lease);
      n pg_catalog.int4 := take_tasks.max;
      ids pg_catalog.int8[];
    BEGIN
      IF n IS NULL OR n < 1 OR n > 1000 THEN
        RAISE EXCEPTION 'stepd: max must be between 1 and 1000 (got %)', coalesce(n::pg_catalog.text, 'NULL')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF take_tasks.tools IS NULL OR pg_catalog.cardinality(take_tasks.tools) < 1 OR pg_catalog.cardinality(take_tasks.tools) > 100
         OR EXISTS (SELECT 1 FROM pg_catalog.unnest(take_tasks.tools) p
                     WHERE p IS NULL OR p OPERATOR(pg_catalog.!~) '^[A-Za-z0-9_-]+\.([A-Za-z0-9_.*-]+)$' OR pg_catalog.length(p) > 200) THEN
        RAISE EXCEPTION 'stepd: tools must be 1 to 100 patterns like ''billing.*'' or ''billing.charge'''
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      likes := ARRAY(SELECT pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(p, '_', '\_'), '%', '\%'), '*', '%')
                       FROM pg_catalog.unnest(take_tasks.tools) p);
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      -- Leases that ran out first: their steps go back to the executor as lost attempts.
      PERFORM @schema@.stepd_expire_tasks(100);
      -- The candidates, in the order they are served: each workflow's oldest task first, then
      -- each one's second, ... (fair across workflows). Workflow priorities (workflows.priority)
      -- will order here first, before the rank. Computed once, then locked by id: a plan that
      -- joined the walk to the table re-ran the walk for every waiting row. The walk (workflows
      -- in id order) stops once 3 × max + 10 of them have a task for these tools — no more
      -- candidates are kept — or after 1,000 workflows: it used to walk 1,000 every call, most
      -- of a take's cost while thousands of tasks wait (part 34).
      WITH RECURSIVE wf(id, k, hits) AS (
        (SELECT w.workflow_id, 1, 0 FROM @schema@.workflow_steps w
          WHERE w.status = 'pending' AND w.task_timeout_ms IS NOT NULL AND w.task_token_hash IS NULL
          ORDER BY w.workflow_id LIMIT 1)
        UNION ALL
        SELECT (SELECT w.workflow_id FROM @schema@.workflow_steps w
                 WHERE w.status = 'pending' AND w.task_timeout_ms IS NOT NULL AND w.task_token_hash IS NULL
                   AND w.workflow_id > wf.id ORDER BY w.workflow_id LIMIT 1), wf.k + 1,
               wf.hits + CASE WHEN EXISTS (
                 SELECT 1 FROM @schema@.workflow_steps t
                  WHERE t.workflow_id = wf.id AND t.status = 'pending' AND t.task_timeout_ms IS NOT NULL AND t.task_token_hash IS NULL
                    AND t.ready_at <= pg_catalog.now() AND t.tool LIKE ANY (likes)) THEN 1 ELSE 0 END
          FROM wf WHERE wf.id IS NOT NULL AND wf.k < 1000 AND wf.hits < 3 * n + 10),
      candidates AS MATERIALIZED (
        SELECT c.id, c.ready_at, c.rank FROM wf CROSS JOIN LATERAL (
          SELECT t.id, t.ready_at, pg_catalog.row_number() OVER (ORDER BY t.ready_at, t.id) AS rank
            FROM @schema@.workflow_steps t
           WHERE t.workflow_id = wf.id AND t.status = 'pending' AND t.task_timeout_ms IS NOT NULL AND t.task_token_hash IS NULL
             AND t.ready_at <= pg_catalog.now() AND t.tool LIKE ANY (likes)
           ORDER BY t.ready_at, t.id LIMIT n) c
         WHERE wf.id IS NOT NULL)
      SELECT pg_catalog.array_agg(o.id ORDER BY o.rank, o.ready_at, o.id) INTO ids
        FROM (SELECT c.id, c.rank, c.ready_at FROM candidates c ORDER BY c.rank, c.ready_at, c.id LIMIT 3 * n + 10) o;
      IF ids IS NULL THEN
        PERFORM pg_catalog.set_config('stepd.executor', previous, true);
        RETURN;
      END IF;
      RETURN QUERY
      WITH picked AS (
        -- Another worker may hold some of them: skipped (they are its tasks now). Found by the
        -- primary key (part 37): with all three conditions of workflow_steps_tasks_waiting_idx
        -- here, the generic plan read that whole index for the ids (9,944 rows filtered out for
        -- 4 taken beside 10,000 waiting tasks, 10 ms a take). task_timeout_ms is checked below.
        SELECT t.id, pg_catalog.gen_random_uuid() AS tok FROM @schema@.workflow_steps t
         WHERE t.id = ANY (ids) AND t.status = 'pending' AND t.task_token_hash IS NULL
         ORDER BY pg_catalog.array_position(ids, t.id)
         LIMIT n
           FOR UPDATE OF t SKIP LOCKED),
      taken AS (
        UPDATE @schema@.workflow_steps t
           SET task_token_hash = pg_catalog.sha256(pg_catalog.uuid_send(picked.tok)), task_taken_at = pg_catalog.now(), task_taken_by = session_user,
               started_at = pg_catalog.now(), updated_at = pg_catalog.now(), progress = NULL,
               task_deadline = pg_catalog.now() + t.task_timeout_ms * interval '1 millisecond',
               task_lease_until = least(pg_catalog.now() + held, pg_catalog.now() + t.task_timeout_ms * interval '1 millisecond')
          FROM picked WHERE t.id = picked.id AND t.task_timeout_ms IS NOT NULL
        RETURNING t.id, picked.tok, t.tool, t.args, t.workflow_id, t.attempt, t.name, t.first_attempt_id, t.task_deadline)
      SELECT k.id, k.tok, k.tool, coalesce(k.args, '{}'::pg_catalog.jsonb), k.workflow_id, k.attempt, w.created_by,
             k.workflow_id::pg_catalog.text || ':' || k.name || ':' || coalesce(k.first_attempt_id, k.id)::pg_catalog.text,
             k.task_deadline
        FROM taken k JOIN @schema@.workflows w ON w.id = k.workflow_id
       ORDER BY k.id;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_report_tasks(pg_catalog.int8[], pg_catalog.jsonb[]),
       @schema@.finish_tasks(pg_catalog.int8[], pg_catalog.uuid[], pg_catalog.jsonb[]),
       @schema@.take_tasks(pg_catalog.text[], pg_catalog.int4, pg_catalog.interval) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
