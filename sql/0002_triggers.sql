-- stepd schema, part 2: the guard that keeps external writes inside the SQL contract,
-- the freeze of an admitted flow, cancellation, and the wake-up NOTIFY.
--
-- The executor marks its own connections with the setting stepd.executor = 'on'.
-- (Trigger functions name no other function or table unqualified: they run under the
-- caller's search_path.)
-- Writes from any other session may only:
--   * insert a workflow (status 'new');
--   * edit or cancel a workflow that is still 'new'; cancel a 'running' one;
--   * delete a workflow that has finished (completed, failed or cancelled);
--   * ready a pending step: status 'pending' -> 'ready', optionally with result and readied_by.
-- Everything else, TRUNCATE included, is refused with an error (SQLSTATE 23514) naming the rule.
-- Writes made by stepd's own cascades are allowed: the cancel cascade marks itself with the
-- transaction-local setting stepd.cascade = 'on' while it runs, and ON DELETE CASCADE removes
-- steps only once their workflow row is gone. (Trigger depth is no test: another service's
-- trigger that writes steps runs nested too, and must stay inside the contract.)

CREATE FUNCTION stepd_guard_workflows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF NOT coalesce(current_setting('stepd.executor', true), '') = 'on' AND OLD.status NOT IN ('completed', 'failed', 'cancelled') THEN
      RAISE EXCEPTION 'stepd: workflow % is %; only completed, failed or cancelled workflows can be deleted', OLD.id, OLD.status
        USING ERRCODE = 'check_violation', HINT = 'Cancel it first: UPDATE workflows SET status = ''cancelled'' WHERE id = ...';
    END IF;
    RETURN OLD;
  END IF;

  IF TG_OP = 'INSERT' THEN
    IF NOT coalesce(current_setting('stepd.executor', true), '') = 'on' THEN
      -- Timestamps are stepd's: a created_at in the future would make admission violate
      -- workflows_started_after_created.
      NEW.created_at := now();
      NEW.updated_at := now();
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
    END IF;
    RETURN NEW;
  END IF;

  -- UPDATE
  NEW.updated_at := now();
  IF OLD.status <> 'new' AND NEW.flow IS DISTINCT FROM OLD.flow THEN
    RAISE EXCEPTION 'stepd: the flow of workflow % is frozen: it was admitted and is %', OLD.id, OLD.status
      USING ERRCODE = 'check_violation', HINT = 'Start a new workflow with the new flow instead.';
  END IF;
  IF coalesce(current_setting('stepd.executor', true), '') = 'on' THEN
    RETURN NEW;
  END IF;

  IF NEW.id <> OLD.id OR NEW.output IS DISTINCT FROM OLD.output OR NEW.error IS DISTINCT FROM OLD.error
     OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.completed_at IS DISTINCT FROM OLD.completed_at
     OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.deadline_at IS DISTINCT FROM OLD.deadline_at
     OR NEW.step_count IS DISTINCT FROM OLD.step_count THEN
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
  IF OLD.status <> 'new' THEN
    IF NEW.name IS DISTINCT FROM OLD.name OR NEW.input IS DISTINCT FROM OLD.input
       OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.key IS DISTINCT FROM OLD.key THEN
      RAISE EXCEPTION 'stepd: workflow % is %; only a workflow that is still ''new'' can be edited', OLD.id, OLD.status
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER workflows_guard
  BEFORE INSERT OR UPDATE OR DELETE ON workflows
  FOR EACH ROW EXECUTE FUNCTION stepd_guard_workflows();

CREATE FUNCTION stepd_guard_steps() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  workflow_exists boolean;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    NEW.updated_at := now();
  END IF;
  IF coalesce(current_setting('stepd.executor', true), '') = 'on'
     OR coalesce(current_setting('stepd.cascade', true), '') = 'on' THEN
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
  END IF;

  IF TG_OP = 'DELETE' THEN
    -- ON DELETE CASCADE from a (finished) workflow that was just deleted.
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.workflows WHERE id = $1)', TG_TABLE_SCHEMA)
      INTO workflow_exists USING OLD.workflow_id;
    IF NOT workflow_exists THEN RETURN OLD; END IF;
  END IF;

  IF TG_OP = 'INSERT' THEN
    RAISE EXCEPTION 'stepd: steps are created by the executor; start a workflow by inserting into workflows'
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'stepd: steps cannot be deleted one by one; delete their workflow once it has finished'
      USING ERRCODE = 'check_violation';
  END IF;

  -- UPDATE: the only external change is readying a pending step (approving a gate).
  IF OLD.status <> 'pending' THEN
    RAISE EXCEPTION 'stepd: step % is %; only a pending step can be readied', OLD.id, OLD.status
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.status <> 'ready' THEN
    RAISE EXCEPTION 'stepd: a pending step can only be set to ''ready'' from outside the executor (got %)', NEW.status
      USING ERRCODE = 'check_violation', HINT = 'To reject a gate: SET status = ''ready'', result = ''{"approved": false}''';
  END IF;
  IF NEW.id <> OLD.id OR NEW.workflow_id <> OLD.workflow_id OR NEW.name <> OLD.name
     OR NEW.tool IS DISTINCT FROM OLD.tool OR NEW.args IS DISTINCT FROM OLD.args OR NEW.error IS DISTINCT FROM OLD.error
     OR NEW.attempt <> OLD.attempt OR NEW.started_at IS DISTINCT FROM OLD.started_at
     OR NEW.completed_at IS DISTINCT FROM OLD.completed_at OR NEW.lease_until IS DISTINCT FROM OLD.lease_until
     OR NEW.executor_id IS DISTINCT FROM OLD.executor_id OR NEW.fanout_id IS DISTINCT FROM OLD.fanout_id
     OR NEW.item_index IS DISTINCT FROM OLD.item_index OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
     OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.fanout_open IS DISTINCT FROM OLD.fanout_open THEN
    RAISE EXCEPTION 'stepd: readying step % may set only status, result and readied_by', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.ready_at := now();
  NEW.readied_at := now();
  NEW.readied_by := coalesce(NEW.readied_by, session_user);
  RETURN NEW;
END;
$$;

CREATE TRIGGER workflow_steps_guard
  BEFORE INSERT OR UPDATE OR DELETE ON workflow_steps
  FOR EACH ROW EXECUTE FUNCTION stepd_guard_steps();

-- TRUNCATE skips row triggers, so it gets its own guard: emptying the tables under running
-- workflows would strand them.
CREATE FUNCTION stepd_guard_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT coalesce(current_setting('stepd.executor', true), '') = 'on' THEN
    RAISE EXCEPTION 'stepd: % cannot be truncated from outside the executor; delete finished workflows instead', TG_TABLE_NAME
      USING ERRCODE = 'check_violation', HINT = 'DELETE FROM workflows WHERE status IN (''completed'', ''failed'', ''cancelled'')';
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER workflows_guard_truncate
  BEFORE TRUNCATE ON workflows
  FOR EACH STATEMENT EXECUTE FUNCTION stepd_guard_truncate();

CREATE TRIGGER workflow_steps_guard_truncate
  BEFORE TRUNCATE ON workflow_steps
  FOR EACH STATEMENT EXECUTE FUNCTION stepd_guard_truncate();

-- Cancelling a workflow cancels its live steps in the same transaction; the executor is told
-- (below) so it aborts the tools it is running for them.
CREATE FUNCTION stepd_cancel_steps() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  previous text := coalesce(current_setting('stepd.cascade', true), '');
BEGIN
  PERFORM set_config('stepd.cascade', 'on', true);
  EXECUTE format(
    'UPDATE %I.workflow_steps SET status = ''cancelled'', completed_at = now(), lease_until = NULL
      WHERE workflow_id = $1 AND status IN (''pending'', ''ready'', ''running'')', TG_TABLE_SCHEMA)
    USING NEW.id;
  PERFORM set_config('stepd.cascade', previous, true);
  RETURN NULL;
END;
$$;

CREATE TRIGGER workflows_cancel_steps
  AFTER UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status IS DISTINCT FROM 'cancelled')
  EXECUTE FUNCTION stepd_cancel_steps();

-- Wake-ups: a payload of {schema, table, id, status} on channel stepd_wakeup, for writes made
-- outside the executor (the executor chains its own steps directly).
CREATE FUNCTION stepd_notify_wakeup() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT coalesce(current_setting('stepd.executor', true), '') = 'on' THEN
    PERFORM pg_notify('stepd_wakeup', json_build_object(
      'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME, 'id', NEW.id, 'status', NEW.status)::text);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER workflows_wakeup_on_insert
  AFTER INSERT ON workflows
  FOR EACH ROW WHEN (NEW.status = 'new')
  EXECUTE FUNCTION stepd_notify_wakeup();

CREATE TRIGGER workflows_wakeup_on_cancel
  AFTER UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status IS DISTINCT FROM 'cancelled')
  EXECUTE FUNCTION stepd_notify_wakeup();

CREATE TRIGGER workflow_steps_wakeup_on_ready
  AFTER INSERT OR UPDATE OF status ON workflow_steps
  FOR EACH ROW WHEN (NEW.status = 'ready')
  EXECUTE FUNCTION stepd_notify_wakeup();
