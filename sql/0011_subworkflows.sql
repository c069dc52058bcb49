-- stepd schema, part 11: sub-workflows (the executor's side lives in src/executor/subWorkflows.ts).
--
-- A step { "workflow": { "name": …, "version"?: …, "input": {…} } } starts a child workflow: a
-- normal workflows row with parent_id, parent_step_id and depth (sql/0009), inserted by the
-- executor with the parent's created_by and created_role. The step row that waits for it is
-- `pending` with `child_id` set: no lease, no tool slot, nothing for the watchdog to rescue.
--
--   workflow_steps.child_id   the child workflow this attempt waits for (executor-only).
--
-- Three rules hold whoever writes:
--   * the child finishing (completed, failed, cancelled) readies the parent's waiting step in the
--     same transaction, with the child's outcome as the step's result
--     ({"workflowId", "status", "output", "error"}); the executor then completes or fails the step
--     as it completes a readied gate. Exactly once: only a pending step waiting for that child is
--     readied, and a crash either keeps both writes or neither;
--   * a waiting step that is cancelled (its workflow cancelled, failed or completed, or its
--     fan-out failed) cancels its child, whose own steps and children follow;
--   * a client can never ready a waiting step itself (the guard below).

ALTER TABLE workflow_steps ADD COLUMN child_id bigint;

-- The guard for clients: as in part 6, plus child_id is the executor's, and a step waiting for a
-- sub-workflow is not a gate: nobody but the child can complete it.
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
     OR NEW.readied_role IS DISTINCT FROM OLD.readied_role
     OR NEW.child_id IS DISTINCT FROM OLD.child_id THEN
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

  -- A step waiting for a sub-workflow completes when that workflow finishes, never by hand.
  IF OLD.child_id IS NOT NULL THEN
    RAISE EXCEPTION 'stepd: step % waits for sub-workflow %; it completes when that workflow finishes and cannot be readied', OLD.id, OLD.child_id
      USING ERRCODE = 'check_violation',
            HINT = format('Approve or cancel the sub-workflow''s own steps instead (SELECT id, name, status FROM workflow_steps WHERE workflow_id = %s)', OLD.child_id);
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

-- The child finished: ready the parent's step waiting for it, with the child's outcome, and wake
-- the executors (the wake-up trigger is quiet for executor writes). Runs as the tables' owner,
-- marked as the executor for its statement, since a client may cancel a child itself.
CREATE FUNCTION stepd_settle_parent_step() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  previous text := coalesce(current_setting('stepd.executor', true), '');
  readied bigint;
BEGIN
  PERFORM set_config('stepd.executor', 'on', true);
  EXECUTE format(
    'UPDATE %1$I.workflow_steps s SET status = ''ready'', ready_at = now(), updated_at = now(), result = $3
      WHERE s.id = $1 AND s.status = ''pending'' AND s.child_id = $2
        AND EXISTS (SELECT 1 FROM %1$I.workflows p WHERE p.id = s.workflow_id AND p.status = ''running'')
     RETURNING s.id', TG_TABLE_SCHEMA)
    INTO readied
    USING NEW.parent_step_id, NEW.id,
          jsonb_build_object('workflowId', NEW.id::text, 'status', NEW.status, 'output', NEW.output, 'error', NEW.error);
  IF readied IS NOT NULL THEN
    PERFORM pg_notify('stepd_wakeup', json_build_object(
      'schema', TG_TABLE_SCHEMA, 'table', 'workflow_steps', 'id', readied, 'status', 'ready')::text);
  END IF;
  PERFORM set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;

CREATE TRIGGER workflows_settle_parent_step
  AFTER UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.parent_step_id IS NOT NULL AND OLD.status IN ('new', 'running')
                     AND NEW.status IN ('completed', 'failed', 'cancelled'))
  EXECUTE FUNCTION stepd_settle_parent_step();

-- A waiting step was cancelled: cancel its child (its own steps and children follow through
-- their triggers) and tell the executors, so they abort the child's running tools at once.
CREATE FUNCTION stepd_cancel_child_workflow() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  previous text := coalesce(current_setting('stepd.executor', true), '');
  cancelled bigint;
BEGIN
  PERFORM set_config('stepd.executor', 'on', true);
  EXECUTE format(
    'UPDATE %I.workflows SET status = ''cancelled'', cancelled_at = now(), updated_at = now()
      WHERE id = $1 AND status IN (''new'', ''running'') RETURNING id', TG_TABLE_SCHEMA)
    INTO cancelled USING NEW.child_id;
  IF cancelled IS NOT NULL THEN
    PERFORM pg_notify('stepd_wakeup', json_build_object(
      'schema', TG_TABLE_SCHEMA, 'table', 'workflows', 'id', cancelled, 'status', 'cancelled')::text);
  END IF;
  PERFORM set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;

CREATE TRIGGER workflow_steps_cancel_child
  AFTER UPDATE OF status ON workflow_steps
  FOR EACH ROW WHEN (NEW.child_id IS NOT NULL AND NEW.status = 'cancelled' AND OLD.status IN ('pending', 'ready', 'running'))
  EXECUTE FUNCTION stepd_cancel_child_workflow();
