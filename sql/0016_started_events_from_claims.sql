-- stepd schema, part 16: step.started comes from the claim statement itself.
--
-- The executor's claim statements NOTIFY step.started for the rows they claim (one set-based
-- SELECT pg_notify(...) in the statement, in id order), and its sessions say so
-- (stepd.started_events = 'statement', set when they connect). For those sessions the per-row
-- trigger of 0003/0006 no longer runs: its WHEN clause (evaluated without calling the function)
-- is false. Any other session that claims a step (an executor of an earlier version, a DBA's
-- repair) still gets the trigger's event, so every claim by any executor is announced once.
-- Both payloads carry the step name cut to 200 characters: whatever the row holds, a payload stays
-- far below PostgreSQL's 8000-byte limit (ids, attempt and item index are numbers, the schema a
-- name of at most 63 bytes).

DROP TRIGGER workflow_steps_event_started ON workflow_steps;

CREATE TRIGGER workflow_steps_event_started
  AFTER UPDATE OF status ON workflow_steps
  FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status = 'ready'
                     AND pg_catalog.current_setting('stepd.started_events', true) IS DISTINCT FROM 'statement')
  EXECUTE FUNCTION stepd_event_step_started();
