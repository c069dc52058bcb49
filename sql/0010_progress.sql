-- stepd schema, part 10: the latest progress a running step's tool reported.
--
-- An MCP tool call carries a progressToken; the server's notifications/progress arrive at the
-- executor, which writes the latest one here ({"progress": 3, "total": 5, "message": "..."},
-- total and message optional), throttled, and only while this attempt is running under it
-- (recordProgressIfRunning). Each attempt is its own row, so a retry starts without progress.
-- The statement that writes it also NOTIFYs a step.progress event on stepd_events.
ALTER TABLE workflow_steps ADD COLUMN progress jsonb;

ALTER TABLE workflow_steps ADD CONSTRAINT workflow_steps_progress_is_object
  CHECK (progress IS NULL OR (jsonb_typeof(progress) = 'object' AND jsonb_typeof(progress -> 'progress') = 'number'));

-- Progress is the executor's to write: a client (or the CLI) may not set it.
CREATE FUNCTION stepd_guard_progress() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.progress IS DISTINCT FROM OLD.progress THEN
    RAISE EXCEPTION 'stepd: the progress of step % is written by the executor only', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$;

-- The same executor test as the other guards (0006): the marker and a trusted role.
CREATE TRIGGER workflow_steps_guard_progress
  BEFORE UPDATE OF progress ON workflow_steps
  FOR EACH ROW WHEN (NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_guard_progress();
