-- stepd schema, part 6: the trust boundary (who counts as the executor is decided by roles).
--
-- A write is the executor's only when the session carries the marker stepd.executor = 'on'
-- AND its role is trusted: a member of <schema>_executor, or of the role that owns the tables
-- (which could disable the triggers anyway; superusers are members of every role). The marker
-- alone grants nothing: a client that sets it is still guarded. It still tells a superuser's CLI
-- writes (guarded, as any client's) from the executor's.
--
-- The database records who wrote: workflows.created_role (the role that inserted or last edited
-- a new workflow) and workflow_steps.readied_role (the role that readied a pending step), both
-- session_user and never settable by clients. The executor checks created_by against the
-- configured `clients` mapping at admission.
--
-- The roles themselves and their grants are created by the migrator (src/db/migrate.ts), which
-- knows whether it may create roles; this file only names them. Functions are created with the
-- schema and role names baked in (the migrator runs this with search_path set to the schema), so
-- trigger WHEN clauses and other sessions' search_path cannot change what they check.

ALTER TABLE workflows ADD COLUMN created_role text;
ALTER TABLE workflow_steps ADD COLUMN readied_role text;

DO $migration$
DECLARE
  s text := current_schema();
  -- Trusted roles: the tables' owner (this migrator) and <schema>_executor, looked up by name at
  -- run time (the executor role may be created after this file, or by a DBA).
  owner_role text := pg_catalog.quote_ident(current_user::text);
  executor_role text := pg_catalog.quote_ident(current_schema() || '_executor');
  -- The executor test, inlined into each trigger's WHEN clause (cheap: no subquery, no SQL
  -- function call per row). A missing role yields NULL, hence false.
  is_executor text := format(
    $e$(pg_catalog.current_setting('stepd.executor', true) IS NOT DISTINCT FROM 'on'
        AND (coalesce(pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(%1$L)::oid, 'MEMBER'), false)
             OR coalesce(pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(%2$L)::oid, 'MEMBER'), false)))$e$,
    owner_role, executor_role);
BEGIN
  -- Whether `role_name` may act as the executor and as any user (superusers are members of
  -- every role). Unknown roles are not trusted.
  EXECUTE format($f$
    CREATE FUNCTION %1$I.stepd_role_is_trusted(role_name text) RETURNS boolean
    LANGUAGE sql STABLE AS $body$
      SELECT coalesce(pg_catalog.pg_has_role(pg_catalog.to_regrole(pg_catalog.quote_ident(role_name))::oid, pg_catalog.to_regrole(%2$L)::oid, 'MEMBER'), false)
          OR coalesce(pg_catalog.pg_has_role(pg_catalog.to_regrole(pg_catalog.quote_ident(role_name))::oid, pg_catalog.to_regrole(%3$L)::oid, 'MEMBER'), false)
    $body$ $f$, s, owner_role, executor_role);

  -- The same test as a function, for sessions that want to know.
  EXECUTE format($f$
    CREATE FUNCTION %1$I.stepd_is_executor() RETURNS boolean
    LANGUAGE sql STABLE AS $body$ SELECT %2$s $body$ $f$, s, is_executor);

  -- Every guard trigger now asks the role, not the setting.
  EXECUTE format('DROP TRIGGER workflows_guard ON %I.workflows', s);
  EXECUTE format($f$CREATE TRIGGER workflows_guard
    BEFORE INSERT OR UPDATE OR DELETE ON %1$I.workflows
    FOR EACH ROW WHEN (NOT %2$s)
    EXECUTE FUNCTION %1$I.stepd_guard_workflows()$f$, s, is_executor);

  EXECUTE format('DROP TRIGGER workflow_steps_guard ON %I.workflow_steps', s);
  EXECUTE format($f$CREATE TRIGGER workflow_steps_guard
    BEFORE INSERT OR UPDATE OR DELETE ON %1$I.workflow_steps
    FOR EACH ROW WHEN (NOT %2$s)
    EXECUTE FUNCTION %1$I.stepd_guard_steps()$f$, s, is_executor);

  EXECUTE format('DROP TRIGGER workflow_steps_guard_first_attempt ON %I.workflow_steps', s);
  EXECUTE format($f$CREATE TRIGGER workflow_steps_guard_first_attempt
    BEFORE UPDATE OF first_attempt_id ON %1$I.workflow_steps
    FOR EACH ROW WHEN (NOT %2$s)
    EXECUTE FUNCTION %1$I.stepd_guard_first_attempt()$f$, s, is_executor);

  EXECUTE format('DROP TRIGGER workflows_flow_frozen_for_executor ON %I.workflows', s);
  EXECUTE format($f$CREATE TRIGGER workflows_flow_frozen_for_executor
    BEFORE UPDATE OF flow ON %1$I.workflows
    FOR EACH ROW WHEN (OLD.status <> 'new' AND NEW.flow IS DISTINCT FROM OLD.flow AND %2$s)
    EXECUTE FUNCTION %1$I.stepd_refuse_flow_change()$f$, s, is_executor);

  EXECUTE format('DROP TRIGGER workflows_guard_truncate ON %I.workflows', s);
  EXECUTE format($f$CREATE TRIGGER workflows_guard_truncate
    BEFORE TRUNCATE ON %1$I.workflows
    FOR EACH STATEMENT WHEN (NOT %2$s)
    EXECUTE FUNCTION %1$I.stepd_guard_truncate()$f$, s, is_executor);
  EXECUTE format('DROP TRIGGER workflow_steps_guard_truncate ON %I.workflow_steps', s);
  EXECUTE format($f$CREATE TRIGGER workflow_steps_guard_truncate
    BEFORE TRUNCATE ON %1$I.workflow_steps
    FOR EACH STATEMENT WHEN (NOT %2$s)
    EXECUTE FUNCTION %1$I.stepd_guard_truncate()$f$, s, is_executor);
END;
$migration$;

-- The guard bodies run only for writes that are not the executor's (their WHEN clause), so
-- they no longer look at any setting.
CREATE OR REPLACE FUNCTION stepd_guard_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'stepd: % cannot be truncated from outside the executor; delete finished workflows instead', TG_TABLE_NAME
    USING ERRCODE = 'check_violation', HINT = 'DELETE FROM workflows WHERE status IN (''completed'', ''failed'', ''cancelled'')';
END;
$$;

CREATE OR REPLACE FUNCTION stepd_guard_workflows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.status NOT IN ('completed', 'failed', 'cancelled') THEN
      RAISE EXCEPTION 'stepd: workflow % is %; only completed, failed or cancelled workflows can be deleted', OLD.id, OLD.status
        USING ERRCODE = 'check_violation', HINT = 'Cancel it first: UPDATE workflows SET status = ''cancelled'' WHERE id = ...';
    END IF;
    RETURN OLD;
  END IF;

  IF TG_OP = 'INSERT' THEN
    -- Timestamps and the writing role are stepd's.
    NEW.created_at := now();
    NEW.updated_at := now();
    NEW.created_role := session_user;
    IF NEW.status <> 'new' THEN
      RAISE EXCEPTION 'stepd: a new workflow must be inserted with status ''new'' (got %)', NEW.status
        USING ERRCODE = 'check_violation', HINT = 'Leave status out; the executor sets it.';
    END IF;
    IF NEW.output IS NOT NULL OR NEW.error IS NOT NULL OR NEW.started_at IS NOT NULL
       OR NEW.completed_at IS NOT NULL OR NEW.cancelled_at IS NOT NULL
       OR NEW.deadline_at IS NOT NULL OR NEW.step_count <> 0 THEN
      RAISE EXCEPTION 'stepd: a new workflow may set only name, flow, input, created_by and key'
        USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
  END IF;

  -- UPDATE
  NEW.updated_at := now();
  IF OLD.status <> 'new' AND NEW.flow IS DISTINCT FROM OLD.flow THEN
    RAISE EXCEPTION 'stepd: the flow of workflow % is frozen: it was admitted and is %', OLD.id, OLD.status
      USING ERRCODE = 'check_violation', HINT = 'Start a new workflow with the new flow instead.';
  END IF;
  IF NEW.id <> OLD.id OR NEW.output IS DISTINCT FROM OLD.output OR NEW.error IS DISTINCT FROM OLD.error
     OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.completed_at IS DISTINCT FROM OLD.completed_at
     OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.deadline_at IS DISTINCT FROM OLD.deadline_at
     OR NEW.step_count IS DISTINCT FROM OLD.step_count OR NEW.created_role IS DISTINCT FROM OLD.created_role THEN
    RAISE EXCEPTION 'stepd: workflow % may not be changed that way; outside the executor only status may be set (to ''cancelled'')', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;

  IF NEW.status IS DISTINCT FROM OLD.status THEN
    IF NEW.status <> 'cancelled' THEN
      RAISE EXCEPTION 'stepd: workflow % can only be set to ''cancelled'' from outside the executor (got %)', OLD.id, NEW.status
        USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.status NOT IN ('new', 'running') THEN
      RAISE EXCEPTION 'stepd: workflow % is already %; only new or running workflows can be cancelled', OLD.id, OLD.status
        USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.name IS DISTINCT FROM OLD.name OR NEW.flow IS DISTINCT FROM OLD.flow OR NEW.input IS DISTINCT FROM OLD.input
       OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.key IS DISTINCT FROM OLD.key THEN
      RAISE EXCEPTION 'stepd: cancelling workflow % must not change its other columns', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
    NEW.cancelled_at := now();
    RETURN NEW;
  END IF;

  IF NEW.cancelled_at IS DISTINCT FROM OLD.cancelled_at THEN
    RAISE EXCEPTION 'stepd: cancelled_at is set by stepd; cancel with SET status = ''cancelled''' USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.name IS DISTINCT FROM OLD.name OR NEW.input IS DISTINCT FROM OLD.input
     OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.key IS DISTINCT FROM OLD.key
     OR NEW.flow IS DISTINCT FROM OLD.flow THEN
    IF OLD.status <> 'new' THEN
      RAISE EXCEPTION 'stepd: workflow % is %; only a workflow that is still ''new'' can be edited', OLD.id, OLD.status
        USING ERRCODE = 'check_violation';
    END IF;
    -- Whoever edits a new workflow answers for it at admission.
    NEW.created_role := session_user;
  END IF;
  RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION stepd_guard_steps() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  workflow_status text;
BEGIN
  IF TG_OP = 'DELETE' THEN
    -- ON DELETE CASCADE from a (finished) workflow that was just deleted.
    EXECUTE format('SELECT status FROM %I.workflows WHERE id = $1', TG_TABLE_SCHEMA)
      INTO workflow_status USING OLD.workflow_id;
    IF workflow_status IS NULL THEN RETURN OLD; END IF;
    RAISE EXCEPTION 'stepd: steps cannot be deleted one by one; delete their workflow once it has finished'
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'INSERT' THEN
    RAISE EXCEPTION 'stepd: steps are created by the executor; start a workflow by inserting into workflows'
      USING ERRCODE = 'check_violation';
  END IF;

  NEW.updated_at := now();
  IF NEW.id <> OLD.id OR NEW.workflow_id <> OLD.workflow_id OR NEW.name <> OLD.name
     OR NEW.tool IS DISTINCT FROM OLD.tool OR NEW.args IS DISTINCT FROM OLD.args OR NEW.error IS DISTINCT FROM OLD.error
     OR NEW.attempt <> OLD.attempt OR NEW.started_at IS DISTINCT FROM OLD.started_at
     OR NEW.executor_id IS DISTINCT FROM OLD.executor_id OR NEW.fanout_id IS DISTINCT FROM OLD.fanout_id
     OR NEW.item_index IS DISTINCT FROM OLD.item_index OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
     OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.fanout_open IS DISTINCT FROM OLD.fanout_open
     OR NEW.first_attempt_id IS DISTINCT FROM OLD.first_attempt_id
     OR NEW.readied_role IS DISTINCT FROM OLD.readied_role THEN
    RAISE EXCEPTION 'stepd: readying step % may set only status, result and readied_by', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;

  -- Cancelling the live steps of a cancelled workflow (the cancel cascade) is allowed to anyone:
  -- it changes nothing but what the cancellation already decided.
  IF NEW.status = 'cancelled' AND OLD.status IN ('pending', 'ready', 'running')
     AND NEW.result IS NOT DISTINCT FROM OLD.result AND NEW.readied_by IS NOT DISTINCT FROM OLD.readied_by
     AND NEW.readied_at IS NOT DISTINCT FROM OLD.readied_at AND NEW.ready_at IS NOT DISTINCT FROM OLD.ready_at THEN
    EXECUTE format('SELECT status FROM %I.workflows WHERE id = $1', TG_TABLE_SCHEMA)
      INTO workflow_status USING OLD.workflow_id;
    IF workflow_status = 'cancelled' THEN
      NEW.completed_at := greatest(now(), coalesce(OLD.started_at, now()));
      NEW.lease_until := NULL;
      RETURN NEW;
    END IF;
  END IF;

  -- The only other external change is readying a pending step (approving a gate).
  IF OLD.status <> 'pending' THEN
    RAISE EXCEPTION 'stepd: step % is %; only a pending step can be readied', OLD.id, OLD.status
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.status <> 'ready' THEN
    RAISE EXCEPTION 'stepd: a pending step can only be set to ''ready'' from outside the executor (got %)', NEW.status
      USING ERRCODE = 'check_violation', HINT = 'To reject a gate: SET status = ''ready'', result = ''{"approved": false}''';
  END IF;
  IF NEW.completed_at IS DISTINCT FROM OLD.completed_at OR NEW.lease_until IS DISTINCT FROM OLD.lease_until THEN
    RAISE EXCEPTION 'stepd: readying step % may set only status, result and readied_by', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.ready_at := now();
  NEW.readied_at := now();
  NEW.readied_by := coalesce(NEW.readied_by, session_user);
  NEW.readied_role := session_user;
  RETURN NEW;
END;
$$;

-- The cancel cascade runs as the tables' owner (a client role may not write step columns), marked
-- as the executor for its one statement so the per-row guard is skipped. A claim that committed
-- after this transaction began may have set a started_at later than now(): completed_at never
-- precedes it.
CREATE OR REPLACE FUNCTION stepd_cancel_steps() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  previous text := coalesce(current_setting('stepd.executor', true), '');
BEGIN
  PERFORM set_config('stepd.executor', 'on', true);
  EXECUTE format(
    'UPDATE %I.workflow_steps SET status = ''cancelled'', updated_at = now(),
            completed_at = greatest(now(), coalesce(started_at, now())), lease_until = NULL
      WHERE workflow_id = $1 AND status IN (''pending'', ''ready'', ''running'')', TG_TABLE_SCHEMA)
    USING NEW.id;
  PERFORM set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;

-- Events carry the step name cut to 200 characters, so no row can make a claim's NOTIFY payload
-- exceed PostgreSQL's limit (a long name used to fail every claim).
CREATE OR REPLACE FUNCTION stepd_event_step_started() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('stepd.events', true), '') <> 'off' THEN
    PERFORM pg_notify('stepd_events', jsonb_strip_nulls(jsonb_build_object(
      'type', 'step.started', 'schema', TG_TABLE_SCHEMA,
      'workflowId', NEW.workflow_id::text, 'stepId', NEW.id::text, 'step', left(NEW.name, 200),
      'attempt', NEW.attempt, 'itemIndex', NEW.item_index, 'at', coalesce(NEW.started_at, now())))::text);
  END IF;
  RETURN NULL;
END;
$$;
