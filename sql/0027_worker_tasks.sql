-- stepd schema, part 27: worker tools and the SQL worker contract (docs/workers.md).
--
-- The contract (schema `stepd` shown; EXECUTE on these five is granted to <schema>_worker only,
-- a NOLOGIN role that may do nothing else: no table, no other function):
--
--   take_tasks(tools text[], max integer, lease interval)
--     RETURNS TABLE (step_id bigint, token uuid, tool text, args jsonb, workflow_id bigint,
--                    attempt integer, "user" text, idempotency_key text, deadline timestamptz)
--       Claims up to `max` (1..1000) waiting tasks whose tool matches one of `tools` (patterns:
--       'billing.*', 'billing.charge'; 1..100 of them), fairly across workflows (each workflow's
--       oldest task first), FOR UPDATE SKIP LOCKED. Each gets a fresh token, a lease of `lease`
--       (1 second .. 1 day) and a deadline (taken + the step's timeout); the lease never runs past
--       the deadline. Returns nothing when nothing waits.
--   finish_task(step_id bigint, token uuid, result jsonb) RETURNS void
--       The task is done with `result` (SQL NULL is stored as JSON null).
--   fail_task(step_id bigint, token uuid, error jsonb) RETURNS void
--       The task failed: error = {"code": text, "message": text, "retryable": bool,
--       "details"?: any, "retryAfterMs"?: number}. The step's retry/onError policy applies.
--   extend_task(step_id bigint, token uuid, lease interval) RETURNS text
--       'ok' (lease renewed to now() + lease, capped at the deadline) or 'cancelled' (the
--       workflow or the step was cancelled: stop working, report nothing).
--   progress_task(step_id bigint, token uuid, progress jsonb) RETURNS text
--       Records {"progress": number, "total"?: number, "message"?: text}; 'ok' or 'cancelled'.
--
-- Refusals (nothing changes):
--   55000 object_not_in_prerequisite_state, message 'stepd: stale task token for step N: …',
--         DETAIL 'reason=unknown|lost|ended|cancelled': the token is not the task's (forged, or the
--         step was taken again), its lease ran out (lost), it was already finished or failed
--         (ended), or it was cancelled (finish_task and fail_task only; extend_task and
--         progress_task answer 'cancelled').
--   22023 invalid_parameter_value: a bad argument (max, lease, patterns, error or progress shape).
--   54000 program_limit_exceeded: a result above caps.resultBytes (stepd.size_caps), an error
--         above 64 KiB, a progress above 16 KiB.
--   42501 insufficient_privilege: the calling role is not granted <schema>_worker.
--
-- The definer functions write as the executor (stepd.executor = 'on' for the statement, their
-- owner being trusted) and put the setting back; a failed call needs no EXCEPTION block for it
-- (which would cost a subtransaction a call): set_config(…, true) is undone with the aborted
-- (sub)transaction.
--
-- How a worker step moves (the executor owns every transition, as for a readied gate):
--   ready (created as any step) → the executor claims it, checks the user's permission, and
--   hands it to workers: pending with task_timeout_ms set, NOTIFY stepd_tasks → take_tasks:
--   task_token_hash set, lease → finish_task / fail_task: ready with task_ended and the result or
--   error, NOTIFY stepd_wakeup → the executor claims it and records that outcome (retries,
--   onError, transitions as for any step). A lease that runs out (stepd_expire_tasks, called by
--   take_tasks and by the executors' watchdog) makes it ready with a `lost` error (retryable;
--   `timeout` when the deadline was reached), so the executor retries it as a new attempt that
--   a worker takes again. Cancelling the workflow cancels the pending row (the cascade of part 6).
--   A client may not ready a worker's pending step (trigger workflow_steps_guard_tasks). The
--   table keeps only a token's sha256: a role that may read workflow_steps never sees one.
--   A reported step keeps the ready_at it had when it became due, so the claim takes it before
--   steps that became due after it (with `limits`, a freed slot goes to the oldest: the outcome
--   is recorded before newer steps of the same tool are handed out).

ALTER TABLE workflow_steps
  ADD COLUMN task_timeout_ms  integer,      -- set when the executor hands the step to workers
  ADD COLUMN task_token_hash  bytea,        -- sha256 of the current taker's token (never the token)
  ADD COLUMN task_taken_by    text,         -- session_user of take_tasks
  ADD COLUMN task_taken_at    timestamptz,
  ADD COLUMN task_lease_until timestamptz,
  ADD COLUMN task_deadline    timestamptz,
  ADD COLUMN task_ended       text;         -- finished | failed | lost | timeout

ALTER TABLE workflow_steps ADD CONSTRAINT workflow_steps_task_ended_valid
  CHECK (task_ended IS NULL OR task_ended IN ('finished', 'failed', 'lost', 'timeout'));
ALTER TABLE workflow_steps ADD CONSTRAINT workflow_steps_task_timeout_positive
  CHECK (task_timeout_ms IS NULL OR task_timeout_ms > 0);

-- Waiting tasks, per workflow (take_tasks walks the workflows, then each one's oldest).
CREATE INDEX workflow_steps_tasks_waiting_idx ON workflow_steps (workflow_id, ready_at, id)
  WHERE status = 'pending' AND task_timeout_ms IS NOT NULL AND task_token_hash IS NULL;
-- Taken tasks by lease (the expiry sweep).
CREATE INDEX workflow_steps_tasks_taken_idx ON workflow_steps (task_lease_until)
  WHERE status = 'pending' AND task_token_hash IS NOT NULL AND task_ended IS NULL;

-- A worker's pending step is no gate: only finish_task / fail_task (or the executor) move it.
CREATE FUNCTION stepd_guard_tasks() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'stepd: step % is served by workers; only a worker''s finish_task or fail_task completes it', OLD.id
    USING ERRCODE = 'insufficient_privilege', HINT = 'Cancel the workflow instead, or serve the tool with a worker (docs/workers.md).';
END;
$$;
REVOKE ALL ON FUNCTION stepd_guard_tasks() FROM PUBLIC;

CREATE TRIGGER workflow_steps_guard_tasks
  BEFORE UPDATE ON workflow_steps
  FOR EACH ROW WHEN (OLD.task_timeout_ms IS NOT NULL AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_guard_tasks();

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
  schema_name pg_catalog.text := pg_catalog.current_schema();
  body pg_catalog.text;
BEGIN
  -- Leases that ran out become `lost` (or `timeout`) outcomes for the executor to record. Not a
  -- definer function: take_tasks calls it as the owner, executors with their own grants.
  body := $f$
    CREATE FUNCTION @schema@.stepd_expire_tasks(lim pg_catalog.int4) RETURNS pg_catalog.int4
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      n pg_catalog.int4;
    BEGIN
      WITH expired AS (
        SELECT e.id FROM @schema@.workflow_steps e
         WHERE e.status = 'pending' AND e.task_token_hash IS NOT NULL AND e.task_ended IS NULL
           AND e.task_lease_until < pg_catalog.now()
         ORDER BY e.task_lease_until LIMIT lim FOR UPDATE SKIP LOCKED),
      ended AS (
        UPDATE @schema@.workflow_steps x
           SET status = 'ready', ready_at = coalesce(x.ready_at, pg_catalog.now()), updated_at = pg_catalog.now(),
               task_ended = CASE WHEN x.task_lease_until >= x.task_deadline THEN 'timeout' ELSE 'lost' END,
               error = CASE WHEN x.task_lease_until >= x.task_deadline
                 THEN pg_catalog.jsonb_build_object('code', 'timeout',
                        'message', pg_catalog.format('step timed out after %s ms', x.task_timeout_ms),
                        'retryable', true, 'details', pg_catalog.jsonb_build_object('timeoutMs', x.task_timeout_ms))
                 ELSE pg_catalog.jsonb_build_object('code', 'lost',
                        'message', 'the worker holding this task stopped renewing its lease before it ran out',
                        'retryable', true, 'details', pg_catalog.jsonb_build_object('worker', x.task_taken_by))
               END
          FROM expired WHERE x.id = expired.id
        RETURNING x.id)
      SELECT pg_catalog.count(*)::pg_catalog.int4 INTO n FROM ended;
      IF n > 0 THEN
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', @literal@, 'table', 'workflow_steps', 'status', 'ready')::pg_catalog.text);
      END IF;
      RETURN n;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));

  -- The checks every call with a token makes, the row locked: raises the stale-token refusal,
  -- or returns the row's status ('pending' = held, 'cancelled'). Internal: PUBLIC loses EXECUTE.
  body := $f$
    CREATE FUNCTION @schema@.stepd_task_held(p_step_id pg_catalog.int8, p_token pg_catalog.uuid, cancelled_ok pg_catalog.bool)
    RETURNS pg_catalog.text
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      r record;
      reason pg_catalog.text;
    BEGIN
      IF p_step_id IS NULL OR p_token IS NULL THEN
        RAISE EXCEPTION 'stepd: step_id and token are required' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT t.status, t.task_token_hash, t.task_ended, t.task_lease_until INTO r
        FROM @schema@.workflow_steps t WHERE t.id = p_step_id AND t.task_timeout_ms IS NOT NULL FOR UPDATE;
      IF NOT FOUND OR r.task_token_hash IS DISTINCT FROM pg_catalog.sha256(pg_catalog.uuid_send(p_token)) THEN
        reason := 'unknown';
      ELSIF r.status = 'cancelled' THEN
        IF cancelled_ok THEN RETURN 'cancelled'; END IF;
        reason := 'cancelled';
      ELSIF r.task_ended IN ('lost', 'timeout') THEN
        reason := 'lost';
      ELSIF r.task_ended IS NOT NULL OR r.status <> 'pending' THEN
        reason := 'ended';
      ELSIF r.task_lease_until < pg_catalog.now() THEN
        reason := 'lost';
      ELSE
        RETURN 'pending';
      END IF;
      RAISE EXCEPTION 'stepd: stale task token for step %: %', p_step_id,
        CASE reason
          WHEN 'unknown' THEN 'no task of that id holds that token (forged, or the step was taken again)'
          WHEN 'cancelled' THEN 'the task was cancelled'
          WHEN 'lost' THEN 'its lease ran out; the step is retried as a new attempt'
          ELSE 'the task was already finished or failed' END
        USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = 'reason=' || reason,
              HINT = 'Stop working on this task and report nothing more for it.';
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  -- A lease argument: 1 second .. 1 day.
  body := $f$
    CREATE FUNCTION @schema@.stepd_task_lease(lease pg_catalog.interval) RETURNS pg_catalog.interval
    LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      IF lease IS NULL OR lease < pg_catalog.make_interval(secs => 1) OR lease > pg_catalog.make_interval(days => 1) THEN
        RAISE EXCEPTION 'stepd: lease must be between 1 second and 1 day (got %)', coalesce(lease::pg_catalog.text, 'NULL')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      RETURN lease;
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  -- A worker's report: the step is ready again with what happened, for the executor to record
  -- (its ready_at kept, see above), and the executors are woken. Internal: PUBLIC loses EXECUTE.
  body := $f$
    CREATE FUNCTION @schema@.stepd_report_task(p_step_id pg_catalog.int8, p_result pg_catalog.jsonb, p_error pg_catalog.jsonb, p_ended pg_catalog.text)
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
      PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
        'schema', @literal@, 'table', 'workflow_steps', 'id', p_step_id, 'status', 'ready')::pg_catalog.text);
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));

  body := $f$
    CREATE FUNCTION @schema@.take_tasks(tools pg_catalog.text[], max pg_catalog.int4, lease pg_catalog.interval)
    RETURNS TABLE (step_id pg_catalog.int8, token pg_catalog.uuid, tool pg_catalog.text, args pg_catalog.jsonb,
                   workflow_id pg_catalog.int8, attempt pg_catalog.int4, "user" pg_catalog.text,
                   idempotency_key pg_catalog.text, deadline pg_catalog.timestamptz)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    -- Index scans only, as the executor's claims (src/db/connect.ts, BEGIN_PREFERRING_INDEX_SCANS):
    -- planned with statistics from before a burst, the walk over workflows read the table whole
    -- at every step (about a second a call beside 2,000 waiting tasks).
    SET enable_seqscan = off SET enable_bitmapscan = off AS $body$
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
      -- joined the walk to the table re-ran the walk for every waiting row.
      WITH RECURSIVE wf(id, k) AS (
        (SELECT w.workflow_id, 1 FROM @schema@.workflow_steps w
          WHERE w.status = 'pending' AND w.task_timeout_ms IS NOT NULL AND w.task_token_hash IS NULL
          ORDER BY w.workflow_id LIMIT 1)
        UNION ALL
        SELECT (SELECT w.workflow_id FROM @schema@.workflow_steps w
                 WHERE w.status = 'pending' AND w.task_timeout_ms IS NOT NULL AND w.task_token_hash IS NULL
                   AND w.workflow_id > wf.id ORDER BY w.workflow_id LIMIT 1), wf.k + 1
          FROM wf WHERE wf.id IS NOT NULL AND wf.k < 1000),
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

  body := $f$
    CREATE FUNCTION @schema@.finish_task(step_id pg_catalog.int8, token pg_catalog.uuid, result pg_catalog.jsonb)
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_variable
    DECLARE
      value pg_catalog.jsonb := coalesce(finish_task.result, 'null'::pg_catalog.jsonb);
      cap pg_catalog.int8;
      over pg_catalog.int8;
    BEGIN
      PERFORM @schema@.stepd_task_held(finish_task.step_id, finish_task.token, false);
      SELECT coalesce(c.result_bytes, 4194304) INTO cap FROM (SELECT 1) d LEFT JOIN @schema@.size_caps c ON c.id;
      over := @schema@.stepd_json_bytes_above(value, cap);
      IF over IS NOT NULL THEN
        RAISE EXCEPTION 'stepd: the result of step % is % bytes as JSON, above caps.resultBytes (% bytes)', finish_task.step_id, over, cap
          USING ERRCODE = 'program_limit_exceeded', DETAIL = pg_catalog.format('cap=caps.resultBytes limit=%s actual=%s', cap, over),
                HINT = 'Store large values elsewhere and return a reference to them.';
      END IF;
      PERFORM @schema@.stepd_report_task(finish_task.step_id, value, NULL, 'finished');
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  body := $f$
    CREATE FUNCTION @schema@.fail_task(step_id pg_catalog.int8, token pg_catalog.uuid, error pg_catalog.jsonb)
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_variable
    DECLARE
      e pg_catalog.jsonb := fail_task.error;
      code pg_catalog.text;
      message pg_catalog.text;
      stored pg_catalog.jsonb;
    BEGIN
      PERFORM @schema@.stepd_task_held(fail_task.step_id, fail_task.token, false);
      IF e IS NULL OR pg_catalog.jsonb_typeof(e) <> 'object' THEN
        RAISE EXCEPTION 'stepd: error must be a JSON object {"code", "message", "retryable"}' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF @schema@.stepd_json_bytes_above(e, 65536) IS NOT NULL THEN
        RAISE EXCEPTION 'stepd: the error of step % is above 64 KiB as JSON', fail_task.step_id
          USING ERRCODE = 'program_limit_exceeded', DETAIL = 'cap=error limit=65536';
      END IF;
      IF e OPERATOR(pg_catalog.?) 'code' AND (pg_catalog.jsonb_typeof(e OPERATOR(pg_catalog.->) 'code') <> 'string'
         OR (e OPERATOR(pg_catalog.->>) 'code') OPERATOR(pg_catalog.!~) '^[A-Za-z][A-Za-z0-9_.:-]{0,99}$') THEN
        RAISE EXCEPTION 'stepd: error.code must be a word of letters, digits and _ . : - (at most 100), starting with a letter'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      code := coalesce(e OPERATOR(pg_catalog.->>) 'code', 'worker_error');
      IF e OPERATOR(pg_catalog.?) 'message' AND pg_catalog.jsonb_typeof(e OPERATOR(pg_catalog.->) 'message') <> 'string' THEN
        RAISE EXCEPTION 'stepd: error.message must be a string' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF e OPERATOR(pg_catalog.?) 'retryable' AND pg_catalog.jsonb_typeof(e OPERATOR(pg_catalog.->) 'retryable') <> 'boolean' THEN
        RAISE EXCEPTION 'stepd: error.retryable must be true or false' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF e OPERATOR(pg_catalog.?) 'retryAfterMs' AND (pg_catalog.jsonb_typeof(e OPERATOR(pg_catalog.->) 'retryAfterMs') <> 'number'
         OR (e OPERATOR(pg_catalog.->>) 'retryAfterMs')::pg_catalog.numeric < 0) THEN
        RAISE EXCEPTION 'stepd: error.retryAfterMs must be a number of milliseconds, at least 0' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      message := pg_catalog.left(coalesce(e OPERATOR(pg_catalog.->>) 'message', 'the worker reported a failure'), 2000);
      stored := pg_catalog.jsonb_build_object('code', code, 'message', message,
                  'retryable', coalesce((e OPERATOR(pg_catalog.->>) 'retryable')::pg_catalog.bool, false));
      IF e OPERATOR(pg_catalog.?) 'details' THEN
        stored := stored OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('details', e OPERATOR(pg_catalog.->) 'details');
      END IF;
      IF e OPERATOR(pg_catalog.?) 'retryAfterMs' THEN
        stored := stored OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('retryAfterMs', e OPERATOR(pg_catalog.->) 'retryAfterMs');
      END IF;
      PERFORM @schema@.stepd_report_task(fail_task.step_id, NULL, stored, 'failed');
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  body := $f$
    CREATE FUNCTION @schema@.extend_task(step_id pg_catalog.int8, token pg_catalog.uuid, lease pg_catalog.interval)
    RETURNS pg_catalog.text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_variable
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      held pg_catalog.interval := @schema@.stepd_task_lease(extend_task.lease);
    BEGIN
      IF @schema@.stepd_task_held(extend_task.step_id, extend_task.token, true) = 'cancelled' THEN
        RETURN 'cancelled';
      END IF;
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      UPDATE @schema@.workflow_steps t
         SET task_lease_until = least(pg_catalog.now() + held, t.task_deadline), updated_at = pg_catalog.now()
       WHERE t.id = extend_task.step_id;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN 'ok';
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(body, '@schema@', s);

  body := $f$
    CREATE FUNCTION @schema@.progress_task(step_id pg_catalog.int8, token pg_catalog.uuid, progress pg_catalog.jsonb)
    RETURNS pg_catalog.text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_variable
    DECLARE
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      p pg_catalog.jsonb := progress_task.progress;
      r record;
    BEGIN
      IF @schema@.stepd_task_held(progress_task.step_id, progress_task.token, true) = 'cancelled' THEN
        RETURN 'cancelled';
      END IF;
      IF p IS NULL OR pg_catalog.jsonb_typeof(p) <> 'object' OR pg_catalog.jsonb_typeof(p OPERATOR(pg_catalog.->) 'progress') IS DISTINCT FROM 'number'
         OR (p OPERATOR(pg_catalog.?) 'total' AND pg_catalog.jsonb_typeof(p OPERATOR(pg_catalog.->) 'total') <> 'number')
         OR (p OPERATOR(pg_catalog.?) 'message' AND pg_catalog.jsonb_typeof(p OPERATOR(pg_catalog.->) 'message') <> 'string')
         OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(p) k WHERE k NOT IN ('progress', 'total', 'message')) THEN
        RAISE EXCEPTION 'stepd: progress must be {"progress": number, "total"?: number, "message"?: string}'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF @schema@.stepd_json_bytes_above(p, 16384) IS NOT NULL THEN
        RAISE EXCEPTION 'stepd: the progress of step % is above 16 KiB as JSON', progress_task.step_id
          USING ERRCODE = 'program_limit_exceeded', DETAIL = 'cap=progress limit=16384';
      END IF;
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      UPDATE @schema@.workflow_steps t SET progress = p, updated_at = pg_catalog.now()
       WHERE t.id = progress_task.step_id
      RETURNING t.id, t.workflow_id, t.name, t.attempt, t.item_index INTO r;
      PERFORM pg_catalog.pg_notify('stepd_events', pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
        'type', 'step.progress', 'schema', @literal@, 'workflowId', r.workflow_id::pg_catalog.text,
        'stepId', r.id::pg_catalog.text, 'step', pg_catalog.left(r.name, 200), 'attempt', r.attempt,
        'itemIndex', r.item_index, 'progress', p, 'at', pg_catalog.now()))::pg_catalog.text);
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN 'ok';
    END;
    $body$ $f$;
  EXECUTE pg_catalog.replace(pg_catalog.replace(body, '@schema@', s), '@literal@', pg_catalog.quote_literal(schema_name));

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_expire_tasks(pg_catalog.int4),
       @schema@.stepd_task_held(pg_catalog.int8, pg_catalog.uuid, pg_catalog.bool),
       @schema@.stepd_task_lease(pg_catalog.interval),
       @schema@.stepd_report_task(pg_catalog.int8, pg_catalog.jsonb, pg_catalog.jsonb, pg_catalog.text),
       @schema@.take_tasks(pg_catalog.text[], pg_catalog.int4, pg_catalog.interval),
       @schema@.finish_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.jsonb),
       @schema@.fail_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.jsonb),
       @schema@.extend_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.interval),
       @schema@.progress_task(pg_catalog.int8, pg_catalog.uuid, pg_catalog.jsonb) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
