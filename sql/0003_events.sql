-- stepd schema, part 3: lifecycle events the database announces itself on channel stepd_events
-- (the executor NOTIFYs the others from its transactions; see src/events.ts for the payload).
--
--   step.started        a ready step was claimed (status ready -> running), by any executor;
--   workflow.cancelled  a workflow was set to 'cancelled', usually from outside the executor.
--
-- Both are NOTIFYed by the statement that makes the change, so they are delivered when its
-- transaction commits and never for a rollback. A session may silence them with
-- SET stepd.events = 'off'. Trigger functions name nothing unqualified but pg_catalog.

CREATE FUNCTION stepd_event_step_started() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('stepd.events', true), '') <> 'off' THEN
    PERFORM pg_notify('stepd_events', jsonb_strip_nulls(jsonb_build_object(
      'type', 'step.started', 'schema', TG_TABLE_SCHEMA,
      'workflowId', NEW.workflow_id::text, 'stepId', NEW.id::text, 'step', NEW.name,
      'attempt', NEW.attempt, 'itemIndex', NEW.item_index, 'at', coalesce(NEW.started_at, now())))::text);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER workflow_steps_event_started
  AFTER UPDATE OF status ON workflow_steps
  FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status = 'ready')
  EXECUTE FUNCTION stepd_event_step_started();

CREATE FUNCTION stepd_event_workflow_cancelled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('stepd.events', true), '') <> 'off' THEN
    PERFORM pg_notify('stepd_events', json_build_object(
      'type', 'workflow.cancelled', 'schema', TG_TABLE_SCHEMA,
      'workflowId', NEW.id::text, 'at', coalesce(NEW.cancelled_at, now()))::text);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER workflows_event_cancelled
  AFTER UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status IS DISTINCT FROM 'cancelled')
  EXECUTE FUNCTION stepd_event_workflow_cancelled();
