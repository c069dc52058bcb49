-- stepd schema, part 5: every retry row remembers the first attempt of its step, so a tool sees
-- the same idempotency key on every attempt of one step (executor bookkeeping; null on a first
-- attempt, which is its own first attempt).
ALTER TABLE workflow_steps ADD COLUMN first_attempt_id bigint;

-- A readier may not change it either: the guard compares it like the other executor columns.
CREATE OR REPLACE FUNCTION stepd_guard_first_attempt() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.first_attempt_id IS DISTINCT FROM OLD.first_attempt_id THEN
    RAISE EXCEPTION 'stepd: readying step % may set only status, result and readied_by', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER workflow_steps_guard_first_attempt
  BEFORE UPDATE OF first_attempt_id ON workflow_steps
  FOR EACH ROW WHEN (coalesce(current_setting('stepd.executor', true), '') <> 'on')
  EXECUTE FUNCTION stepd_guard_first_attempt();
