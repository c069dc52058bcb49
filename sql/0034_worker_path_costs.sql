-- stepd schema, part 34: the worker path's costs (docs/performance.md, "Workers"). Two changes to
-- part 27's functions, neither to what they promise:
--
--   take_tasks walks only as many workflows as it keeps candidates from (3 × max + 10 that have a
--   task for the caller's tools, at most 1,000 walked, as before); it walked 1,000 on every call.
--   Still each workflow's oldest task first, then each one's second, ...; workflows in id order.
--   Its statements use generic plans (plan_cache_mode), planned once per session, not per call.
--
--   A worker's report (finish_task, fail_task) wakes the executors only when no other report is
--   waiting already (below).
--
-- Every transaction that NOTIFYs takes PostgreSQL's notification queue lock at commit and keeps it
-- through its WAL flush, so notifying commits run one at a time, cluster-wide. Part 27 had every
-- finish_task / fail_task NOTIFY `stepd_wakeup`: one serialized commit per worker step, the
-- bound of the worker path's rate (and the executors' own commits queued behind them). Now a
-- report NOTIFYs only when no other report is on its way to an executor already: one made ready
-- within the last second (its report woke the executors, or an earlier one's did, down to the
-- first of the run, which did NOTIFY), or one an executor claimed within the last 250 ms. An
-- executor that claims reported steps looks for more 10 ms later, backing off, until 500 ms pass without one
-- (src/executor/reportLookout.ts), which finds this one; the executors' poll stays the
-- backstop. A report that waits longer than a second (gated by a key or a rate, or no executor
-- alive) wakes nobody soon, so the next report NOTIFYs again. The payload no longer names the
-- step (no executor reads it; wakeupHint.ts): a constant one.
--
-- Both keep their signatures, owners and grants (CREATE OR REPLACE): take_tasks stays SECURITY
-- DEFINER with its search_path, EXECUTE for <schema>_worker only; stepd_report_task stays
-- internal (PUBLIC has no EXECUTE; only finish_task and fail_task call it, as their owner).

-- Reported steps waiting for an executor, or being recorded by one (the check above; the
-- toolless claim reads workflow_steps_ready_idx as before).
CREATE INDEX workflow_steps_reported_idx ON workflow_steps (updated_at)
  WHERE status IN ('ready', 'running') AND task_ended IS NOT NULL AND NOT gated;

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
  body := $f$
    CREATE OR REPLACE FUNCTION @schema@.stepd_report_task(p_step_id pg_catalog.int8, p_result pg_catalog.jsonb, p_error pg_catalog.jsonb, p_ended pg_catalog.text)
    RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
    BEGIN
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      UPDATE @schema@.workflow_steps t
         SET status = 'ready', ready_at = coalesce(t.ready_at, pg_catalog.now()), updated_at = pg_catalog.now(),
             result = p_result, error = p_error, task_ended = p_ended
       WHERE t.id = p_step_id;
      IF NOT EXISTS (SELECT 1 FROM @schema@.workflow_steps r
                      WHERE r.status IN ('ready', 'running') AND r.task_ended IS NOT NULL AND NOT r.gated
                        AND r.updated_at > pg_catalog.now() - CASE r.status WHEN 'ready' THEN pg_catalog.make_interval(secs => 1)
                                                                                       ELSE pg_catalog.make_interval(secs => 0.25) END
                        AND r.id OPERATOR(pg_catalog.<>) p_step_id) THEN
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', @literal@, 'table', 'workflow_steps', 'status', 'ready')::pg_catalog.text);
      END IF;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));
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
        -- Another worker may hold some of them: skipped (they are its tasks now).
        SELECT t.id, pg_catalog.gen_random_uuid() AS tok FROM @schema@.workflow_steps t
         WHERE t.id = ANY (ids) AND t.status = 'pending' AND t.task_timeout_ms IS NOT NULL AND t.task_token_hash IS NULL
         ORDER BY pg_catalog.array_position(ids, t.id)
         LIMIT n
           FOR UPDATE OF t SKIP LOCKED),
      taken AS (
        UPDATE @schema@.workflow_steps t
           SET task_token_hash = pg_catalog.sha256(pg_catalog.uuid_send(picked.tok)), task_taken_at = pg_catalog.now(), task_taken_by = session_user,
               started_at = pg_catalog.now(), updated_at = pg_catalog.now(), progress = NULL,
               task_deadline = pg_catalog.now() + t.task_timeout_ms * interval '1 millisecond',
               task_lease_until = least(pg_catalog.now() + held, pg_catalog.now() + t.task_timeout_ms * interval '1 millisecond')
          FROM picked WHERE t.id = picked.id
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
    'REVOKE ALL ON FUNCTION @schema@.stepd_report_task(pg_catalog.int8, pg_catalog.jsonb, pg_catalog.jsonb, pg_catalog.text),
       @schema@.take_tasks(pg_catalog.text[], pg_catalog.int4, pg_catalog.interval) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
