-- stepd schema, part 20: tenant isolation of the SQL contract (docs/security.md).
--
--   definer paths   every SECURITY DEFINER function runs with search_path = pg_catalog, pg_temp
--                   (pg_temp LAST) and names every table, function and type it uses with its
--                   schema. With `SET search_path = pg_catalog` alone PostgreSQL searches the
--                   caller's temporary schema FIRST for types and relations, so a client's
--                   `CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_temp.f(VALUE))` ran
--                   f as the tables' owner when it cancelled a workflow. The three trigger
--                   functions of parts 6 and 11 are re-created here; nobody calls them directly,
--                   so PUBLIC loses EXECUTE on them.
--   nested guards   triggers fired by a definer function's writes run as the owner too. The
--                   guard functions declare variables, whose types PL/pgSQL resolves once per
--                   session (under whatever search_path was current then): a client that fired
--                   a guard first with its pg_temp.text in front would have a domain of its own
--                   in the owner's later run. The guards now pin the same search_path
--                   (and so does the truncate guard, whose hint now names delete_workflows).
--   no table lock   clients lose the table-level DELETE grants on workflows and schedules (see
--                   src/db/roles.ts): PostgreSQL lets a table-level UPDATE, DELETE or TRUNCATE
--                   privilege take any LOCK TABLE mode, and a client held ACCESS EXCLUSIVE on
--                   workflows, stalling every executor statement. They delete through two
--                   definer functions instead:
--                     delete_workflows(ids bigint[]) → the ids deleted. Finished workflows only,
--                       the caller's own (created_role is session_user or a role it is a member
--                       of) unless it is trusted, never a sub-workflow child on its own (its
--                       parent takes it), never a parent whose child still lives. Steps and
--                       children go with it through the foreign keys, as a DELETE did.
--                     remove_schedule(name text) → the removed row; the owner check of part 15
--                       (schedules_owner, by session_user) still decides.
--   own new rows    a client edits (name, flow, flow_version, input, created_by, key, start_at)
--                   only its own `new` workflows, and never a sub-workflow's child: rewriting a
--                   waiting child's flow made another service's parents complete with the
--                   writer's output (trigger workflows_guard_edit_owner). Trusted roles keep
--                   every right they had. Cancel and redrive are unchanged.

-- The cancel cascade of part 6, pinned.
CREATE OR REPLACE FUNCTION stepd_cancel_steps() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
BEGIN
  PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
  EXECUTE pg_catalog.format(
    'UPDATE %I.workflow_steps SET status = ''cancelled'', updated_at = pg_catalog.now(),
            completed_at = greatest(pg_catalog.now(), coalesce(started_at, pg_catalog.now())), lease_until = NULL
      WHERE workflow_id = $1 AND status IN (''pending'', ''ready'', ''running'')', TG_TABLE_SCHEMA)
    USING NEW.id;
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;

-- A child finished: ready its parent's waiting step (part 11), pinned.
CREATE OR REPLACE FUNCTION stepd_settle_parent_step() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
  readied pg_catalog.int8;
BEGIN
  PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
  EXECUTE pg_catalog.format(
    'UPDATE %1$I.workflow_steps s SET status = ''ready'', ready_at = pg_catalog.now(), updated_at = pg_catalog.now(), result = $3
      WHERE s.id = $1 AND s.status = ''pending'' AND s.child_id = $2
        AND EXISTS (SELECT 1 FROM %1$I.workflows p WHERE p.id = s.workflow_id AND p.status = ''running'')
     RETURNING s.id', TG_TABLE_SCHEMA)
    INTO readied
    USING NEW.parent_step_id, NEW.id,
          pg_catalog.jsonb_build_object('workflowId', NEW.id::pg_catalog.text, 'status', NEW.status, 'output', NEW.output, 'error', NEW.error);
  IF readied IS NOT NULL THEN
    PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
      'schema', TG_TABLE_SCHEMA, 'table', 'workflow_steps', 'id', readied, 'status', 'ready')::pg_catalog.text);
  END IF;
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;

-- A waiting step was cancelled: cancel its child (part 11), pinned.
CREATE OR REPLACE FUNCTION stepd_cancel_child_workflow() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
  cancelled pg_catalog.int8;
BEGIN
  PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
  EXECUTE pg_catalog.format(
    'UPDATE %I.workflows SET status = ''cancelled'', cancelled_at = pg_catalog.now(), updated_at = pg_catalog.now()
      WHERE id = $1 AND status IN (''new'', ''running'') RETURNING id', TG_TABLE_SCHEMA)
    INTO cancelled USING NEW.child_id;
  IF cancelled IS NOT NULL THEN
    PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
      'schema', TG_TABLE_SCHEMA, 'table', 'workflows', 'id', cancelled, 'status', 'cancelled')::pg_catalog.text);
  END IF;
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;

REVOKE ALL ON FUNCTION stepd_cancel_steps(), stepd_settle_parent_step(), stepd_cancel_child_workflow() FROM PUBLIC;

-- Edits of a `new` workflow are its writer's (or a trusted role's), and never a sub-workflow
-- child's. A trigger of its own beside workflows_guard (which still judges what may change and
-- stamps the editing role), as part 17 does for redrive.
CREATE FUNCTION stepd_guard_edit_owner() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  trusted pg_catalog.bool;
BEGIN
  EXECUTE pg_catalog.format('SELECT %I.stepd_role_is_trusted($1)', TG_TABLE_SCHEMA) INTO trusted USING session_user::pg_catalog.text;
  IF coalesce(trusted, false) THEN
    RETURN NEW;
  END IF;
  -- A child runs what its parent's step named, for the parent: only the executor edits it.
  IF OLD.parent_id IS NOT NULL THEN
    RAISE EXCEPTION 'stepd: workflow % is a sub-workflow of workflow %; a sub-workflow is never edited from outside the executor', OLD.id, OLD.parent_id
      USING ERRCODE = 'insufficient_privilege', HINT = 'Cancel the parent workflow instead, or start a workflow of your own.';
  END IF;
  IF NOT coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(OLD.created_role))::pg_catalog.oid, 'MEMBER'), false) THEN
    RAISE EXCEPTION 'stepd: workflow % was written by role %; role % may edit only its own new workflows', OLD.id, coalesce(OLD.created_role, '(the executor)'), session_user
      USING ERRCODE = 'insufficient_privilege', HINT = 'Start a workflow of your own instead.';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER workflows_guard_edit_owner
  BEFORE UPDATE OF name, flow, flow_version, input, created_by, key, start_at ON workflows
  FOR EACH ROW WHEN (OLD.status = 'new' AND NOT stepd_is_executor()
                     AND (NEW.name IS DISTINCT FROM OLD.name OR NEW.flow IS DISTINCT FROM OLD.flow
                          OR NEW.flow_version IS DISTINCT FROM OLD.flow_version OR NEW.input IS DISTINCT FROM OLD.input
                          OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.key IS DISTINCT FROM OLD.key
                          OR NEW.start_at IS DISTINCT FROM OLD.start_at))
  EXECUTE FUNCTION stepd_guard_edit_owner();

-- The workflows guard (part 9), pinned like the others that fire under definer writes.
ALTER FUNCTION stepd_guard_workflows() SET search_path = pg_catalog, pg_temp;

-- The guard for clients' step writes (part 11) declares a text variable: pinned (see above).
ALTER FUNCTION stepd_guard_steps() SET search_path = pg_catalog, pg_temp;

-- The truncate guard's hint names the way to delete now.
CREATE OR REPLACE FUNCTION stepd_guard_truncate() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'stepd: % cannot be truncated from outside the executor; delete finished workflows instead', TG_TABLE_NAME
    USING ERRCODE = 'check_violation', HINT = 'SELECT delete_workflows(array(SELECT id FROM workflows WHERE status IN (''completed'', ''failed'', ''cancelled'') AND parent_id IS NULL))';
END;
$$;

-- Deleting finished workflows and removing schedules, without a table-level DELETE grant. The
-- schema's name is baked in where the bodies say @schema@ (these are not triggers: nothing else
-- tells them their schema).
DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.delete_workflows(ids pg_catalog.int8[]) RETURNS SETOF pg_catalog.int8
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      trusted pg_catalog.bool := @schema@.stepd_role_is_trusted(session_user::pg_catalog.text);
      w record;
      live record;
    BEGIN
      -- Locked in id order (two overlapping calls never deadlock), then judged, then deleted.
      FOR w IN SELECT id, status, created_role, parent_id FROM @schema@.workflows
                WHERE id = ANY (ids) ORDER BY id FOR UPDATE LOOP
        -- A child goes with its parent (the foreign key's cascade), in this call or a later one.
        IF w.parent_id IS NOT NULL AND NOT (w.parent_id = ANY (ids)) THEN
          RAISE EXCEPTION 'stepd: workflow % is a sub-workflow of workflow %; it is deleted with its parent, never on its own', w.id, w.parent_id
            USING ERRCODE = 'insufficient_privilege', HINT = pg_catalog.format('Delete workflow %s once it has finished.', w.parent_id);
        END IF;
        IF NOT trusted
           AND NOT coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(w.created_role))::pg_catalog.oid, 'MEMBER'), false) THEN
          RAISE EXCEPTION 'stepd: workflow % was started by role %; role % may delete only its own workflows', w.id, coalesce(w.created_role, '(the executor)'), session_user
            USING ERRCODE = 'insufficient_privilege', HINT = 'Only the role that started a workflow (or an operator) may delete it.';
        END IF;
        IF w.status NOT IN ('completed', 'failed', 'cancelled') THEN
          RAISE EXCEPTION 'stepd: workflow % is %; only completed, failed or cancelled workflows can be deleted', w.id, w.status
            USING ERRCODE = 'check_violation', HINT = 'Cancel it first: UPDATE workflows SET status = ''cancelled'' WHERE id = ...';
        END IF;
        SELECT c.id, c.status INTO live FROM @schema@.workflows c
         WHERE c.parent_id = w.id AND c.status NOT IN ('completed', 'failed', 'cancelled') LIMIT 1;
        IF FOUND THEN
          RAISE EXCEPTION 'stepd: workflow % has a sub-workflow % that is still %; it can be deleted once that has finished', w.id, live.id, live.status
            USING ERRCODE = 'check_violation', HINT = pg_catalog.format('Cancel it first: UPDATE workflows SET status = ''cancelled'' WHERE id = %s', live.id);
        END IF;
      END LOOP;
      RETURN QUERY DELETE FROM @schema@.workflows WHERE id = ANY (ids) RETURNING id;
    END;
    $body$ $f$, '@schema@', s);

  -- schedules_owner (part 15) refuses another role's schedule: it judges session_user.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.remove_schedule(name pg_catalog.text) RETURNS SETOF @schema@.schedules
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
      DELETE FROM @schema@.schedules s WHERE s.name = $1 RETURNING s.*
    $body$ $f$, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.delete_workflows(pg_catalog.int8[]), @schema@.remove_schedule(pg_catalog.text) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
