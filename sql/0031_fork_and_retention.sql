-- stepd schema, part 31: fork a workflow from a chosen step; indexes for retention
-- (docs/operations.md, "Fork" and "Retention").
--
--   forked_from, fork_step   on workflows: the workflow a fork was made from (no foreign key: the
--                   source may be pruned while its fork lives) and the step the fork runs from
--                   (NULL: the flow's start). Clients hold no grant on either column: only
--                   fork_workflow (below) and the executor write them.
--   fork_workflow(source, from_step, input, results) → the new workflow's id. A new workflow
--                   with the source's frozen flow, name and user, the source's input unless
--                   `input` is given, that keeps the results of the steps that finished before
--                   the first top-level row of `from_step` (copied as `done` rows, their fan-out
--                   rows with them), `results` ({"step": value, …}) overriding some of them, and
--                   that the executor admits like any other, creating `from_step` first.
--                   Who may fork: a trusted role any workflow; any other role only the
--                   workflows its own role (or a role it is a member of) started, never a
--                   sub-workflow child on its own (fork its parent), and it may not override the
--                   result of a step someone readied from outside (a gate's approval: that is
--                   the approvers' word, not the forker's). The new row is inserted through the
--                   guard (created_role is the caller, the size caps apply to `input`); the
--                   copies are the owner's writes. SECURITY DEFINER, path pinned, PUBLIC revoked.
--   retention       partial indexes so the leader's batches and `stepd prune` find finished
--                   top-level workflows, and old signals, by age without a scan.

ALTER TABLE workflows ADD COLUMN forked_from bigint;
ALTER TABLE workflows ADD COLUMN fork_step text;
ALTER TABLE workflows ADD CONSTRAINT workflows_fork_step_needs_source CHECK (fork_step IS NULL OR forked_from IS NOT NULL);

CREATE INDEX workflows_finished_age_idx ON workflows (status, (coalesce(completed_at, cancelled_at)))
  WHERE parent_id IS NULL AND status IN ('completed', 'failed', 'cancelled');
CREATE INDEX signals_created_at_idx ON signals (created_at);

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.fork_workflow(source pg_catalog.int8, from_step pg_catalog.text DEFAULT NULL,
                                            input pg_catalog.jsonb DEFAULT NULL, results pg_catalog.jsonb DEFAULT NULL)
    RETURNS pg_catalog.int8
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      trusted pg_catalog.bool := @schema@.stepd_role_is_trusted(session_user::pg_catalog.text);
      previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      src record;
      r record;
      first_row pg_catalog.int8;
      new_id pg_catalog.int8;
      copied_id pg_catalog.int8;
      ids pg_catalog.jsonb := '{}'::pg_catalog.jsonb;
      copied pg_catalog.int4 := 0;
      cap pg_catalog.int8;
      over pg_catalog.int8;
      k pg_catalog.text;
    BEGIN
      SELECT w.id, w.name, w.flow, w.flow_version, w.input, w.created_by, w.created_role, w.parent_id
        INTO src FROM @schema@.workflows w WHERE w.id = source;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'stepd: workflow % does not exist (or was pruned)', source USING ERRCODE = 'no_data_found';
      END IF;
      IF NOT trusted
         AND NOT coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(src.created_role))::pg_catalog.oid, 'MEMBER'), false) THEN
        RAISE EXCEPTION 'stepd: workflow % was started by role %; role % may fork only its own workflows', source, coalesce(src.created_role, '(the executor)'), session_user
          USING ERRCODE = 'insufficient_privilege', HINT = 'Only the role that started a workflow (or an operator) may fork it.';
      END IF;
      IF src.parent_id IS NOT NULL THEN
        RAISE EXCEPTION 'stepd: workflow % is a sub-workflow of workflow %; fork its parent instead', source, src.parent_id
          USING ERRCODE = 'insufficient_privilege';
      END IF;
      IF src.flow IS NULL THEN
        RAISE EXCEPTION 'stepd: workflow % was never admitted (it has no frozen flow); start a new one instead', source
          USING ERRCODE = 'check_violation';
      END IF;
      IF input IS NOT NULL AND pg_catalog.jsonb_typeof(input) <> 'object' THEN
        RAISE EXCEPTION 'stepd: a fork''s input must be a JSON object' USING ERRCODE = 'check_violation';
      END IF;
      IF results IS NOT NULL AND pg_catalog.jsonb_typeof(results) <> 'object' THEN
        RAISE EXCEPTION 'stepd: a fork''s results must be a JSON object {"step": result, ...}' USING ERRCODE = 'check_violation';
      END IF;
      IF from_step IS NULL AND results IS NOT NULL AND results <> '{}'::pg_catalog.jsonb THEN
        RAISE EXCEPTION 'stepd: results can be given only with a step to fork from' USING ERRCODE = 'check_violation';
      END IF;
      IF from_step IS NOT NULL THEN
        SELECT pg_catalog.min(st.id) INTO first_row FROM @schema@.workflow_steps st
         WHERE st.workflow_id = source AND st.name = from_step AND st.fanout_id IS NULL;
        IF first_row IS NULL THEN
          RAISE EXCEPTION 'stepd: step % never ran at the top level of workflow %; fork from a step it reached', pg_catalog.to_json(pg_catalog.left(from_step, 200))::pg_catalog.text, source
            USING ERRCODE = 'check_violation';
        END IF;
      END IF;
      IF results IS NOT NULL THEN
        SELECT coalesce(c.result_bytes, 4194304) INTO cap FROM (SELECT 1) AS d LEFT JOIN @schema@.size_caps AS c ON c.id;
        over := @schema@.stepd_json_bytes_above(results, cap);
        IF over IS NOT NULL THEN
          RAISE EXCEPTION 'stepd: the fork''s results are % bytes as JSON, above caps.resultBytes (% bytes)', over, cap
            USING ERRCODE = 'program_limit_exceeded';
        END IF;
        FOR k IN SELECT pg_catalog.jsonb_object_keys(results) LOOP
          SELECT st.id, st.readied_role INTO r FROM @schema@.workflow_steps st
           WHERE st.workflow_id = source AND st.name = k AND st.status = 'done' AND st.id < first_row
           ORDER BY st.id DESC LIMIT 1;
          IF NOT FOUND THEN
            RAISE EXCEPTION 'stepd: step % did not finish before step % in workflow %; only the results of earlier steps can be given', pg_catalog.to_json(pg_catalog.left(k, 200))::pg_catalog.text, pg_catalog.to_json(pg_catalog.left(from_step, 200))::pg_catalog.text, source
              USING ERRCODE = 'check_violation';
          END IF;
          IF r.readied_role IS NOT NULL AND NOT trusted THEN
            RAISE EXCEPTION 'stepd: step % was readied from outside (an approval); role % may not replace its result in a fork', pg_catalog.to_json(pg_catalog.left(k, 200))::pg_catalog.text, session_user
              USING ERRCODE = 'insufficient_privilege', HINT = 'Fork from the gate itself, so its approvers answer again.';
          END IF;
        END LOOP;
      END IF;

      -- The new row goes through the guard like any client's insert: created_role is the caller.
      INSERT INTO @schema@.workflows (name, flow, flow_version, input, created_by)
      VALUES (src.name, src.flow, src.flow_version, coalesce(input, src.input), src.created_by)
      RETURNING id INTO new_id;

      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      UPDATE @schema@.workflows SET forked_from = source, fork_step = from_step WHERE id = new_id;
      IF first_row IS NOT NULL THEN
        -- Every row that finished before the first row of from_step, in order, fan-out links remapped.
        FOR r IN SELECT st.* FROM @schema@.workflow_steps st
                  WHERE st.workflow_id = source AND st.id < first_row AND st.status = 'done'
                  ORDER BY st.id LOOP
          IF r.fanout_id IS NOT NULL AND NOT (ids ? r.fanout_id::pg_catalog.text) THEN
            CONTINUE;
          END IF;
          INSERT INTO @schema@.workflow_steps (workflow_id, name, tool, args, result, status, attempt, started_at, completed_at,
                                               fanout_id, item_index, readied_by, readied_at, readied_role, fanout_open)
          VALUES (new_id, r.name, r.tool, r.args,
                  CASE WHEN results ? r.name AND r.fanout_id IS NULL THEN results -> r.name ELSE r.result END,
                  'done', 1, pg_catalog.now(), pg_catalog.now(),
                  (ids ->> r.fanout_id::pg_catalog.text)::pg_catalog.int8, r.item_index, r.readied_by, r.readied_at, r.readied_role, false)
          RETURNING id INTO copied_id;
          ids := ids || pg_catalog.jsonb_build_object(r.id::pg_catalog.text, copied_id);
          copied := copied + 1;
        END LOOP;
        UPDATE @schema@.workflows SET step_count = copied WHERE id = new_id;
      END IF;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RETURN new_id;
    EXCEPTION WHEN OTHERS THEN
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      RAISE;
    END;
    $body$ $f$, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.fork_workflow(pg_catalog.int8, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
