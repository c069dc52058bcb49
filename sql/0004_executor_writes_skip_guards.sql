-- stepd schema, part 4: the executor's own writes skip the row triggers that exist for other
-- writers. The guard and wake-up triggers used to run for every row the executor wrote and
-- return at once; a WHEN clause now keeps them from running at all, which makes claims,
-- completions and step inserts markedly cheaper. The executor sets updated_at itself.
--
-- The freeze of an admitted flow still holds for every session, the executor's included.

DROP TRIGGER workflows_guard ON workflows;
CREATE TRIGGER workflows_guard
  BEFORE INSERT OR UPDATE OR DELETE ON workflows
  FOR EACH ROW WHEN (coalesce(current_setting('stepd.executor', true), '') <> 'on')
  EXECUTE FUNCTION stepd_guard_workflows();

DROP TRIGGER workflow_steps_guard ON workflow_steps;
CREATE TRIGGER workflow_steps_guard
  BEFORE INSERT OR UPDATE OR DELETE ON workflow_steps
  FOR EACH ROW WHEN (coalesce(current_setting('stepd.executor', true), '') <> 'on')
  EXECUTE FUNCTION stepd_guard_steps();

DROP TRIGGER workflow_steps_wakeup_on_ready ON workflow_steps;
CREATE TRIGGER workflow_steps_wakeup_on_ready
  AFTER INSERT OR UPDATE OF status ON workflow_steps
  FOR EACH ROW WHEN (NEW.status = 'ready' AND coalesce(current_setting('stepd.executor', true), '') <> 'on')
  EXECUTE FUNCTION stepd_notify_wakeup();

CREATE FUNCTION stepd_refuse_flow_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'stepd: the flow of workflow % is frozen: it was admitted and is %', OLD.id, OLD.status
    USING ERRCODE = 'check_violation', HINT = 'Start a new workflow with the new flow instead.';
END;
$$;

CREATE TRIGGER workflows_flow_frozen_for_executor
  BEFORE UPDATE OF flow ON workflows
  FOR EACH ROW WHEN (coalesce(current_setting('stepd.executor', true), '') = 'on'
                     AND OLD.status <> 'new' AND NEW.flow IS DISTINCT FROM OLD.flow)
  EXECUTE FUNCTION stepd_refuse_flow_change();
