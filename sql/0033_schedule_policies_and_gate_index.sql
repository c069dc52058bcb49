-- stepd schema, part 33: schedule policies (docs/schedules.md) and the waiting-gates index
-- (docs/operations.md, /metrics).
--
--   schedules.overlap    what a tick does while the workflow of the schedule's previous tick is
--                        still new or running: 'allow' (start anyway; the default, as before),
--                        'skip' (start nothing for this tick) or 'cancel-previous' (cancel that
--                        workflow, then start this tick's).
--   schedules.catch_up   ticks that fell while no daemon ran (pg-boss skips them): 'none' (the
--                        default, as before), 'latest' (start the most recent one missed) or
--                        'all' (each one missed, oldest first, at most 100). Never ticks before
--                        the schedule was last written, nor while it was paused.
--   schedules.paused     `stepd schedule pause NAME`: its ticks start nothing until it is resumed;
--                        resuming does not catch up the paused ticks.
--   schedule_ticks.last_workflow_id
--                        the workflow the last started tick inserted (the overlap policies
--                        look at it); executor-only, like the rest of schedule_ticks.
--
-- Pausing, resuming or changing only the policies keeps `created_role`: the role that answers
-- for what the ticks start is the one that last set what they start (cron, flow, input, user).
-- Only the schedule's owner (or a member, or a trusted role) may do any of it (schedules_owner,
-- part 15). Clients get column grants on the three new columns (src/db/roles.ts).

ALTER TABLE schedules
  ADD COLUMN overlap text NOT NULL DEFAULT 'allow',
  ADD COLUMN catch_up text NOT NULL DEFAULT 'none',
  ADD COLUMN paused boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT schedules_overlap_valid CHECK (overlap IN ('skip', 'allow', 'cancel-previous')),
  ADD CONSTRAINT schedules_catch_up_valid CHECK (catch_up IN ('none', 'latest', 'all'));

ALTER TABLE schedule_ticks ADD COLUMN last_workflow_id bigint;

CREATE OR REPLACE FUNCTION stepd_schedules_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  missing boolean;
BEGIN
  IF TG_OP = 'UPDATE'
     AND (NEW.name, NEW.cron, NEW.tz, NEW.flow, NEW.input, NEW.created_by)
         IS NOT DISTINCT FROM (OLD.name, OLD.cron, OLD.tz, OLD.flow, OLD.input, OLD.created_by) THEN
    -- A pause, a resume or a policy change: what runs and as whom are unchanged, so is who answers for it.
    NEW.created_role := OLD.created_role;
  ELSE
    NEW.created_role := session_user;
  END IF;
  NEW.updated_at := now();
  IF TG_OP = 'INSERT' THEN
    NEW.created_at := now();
  ELSE
    NEW.created_at := OLD.created_at;
  END IF;
  BEGIN
    PERFORM now() AT TIME ZONE NEW.tz;
  EXCEPTION WHEN invalid_parameter_value THEN
    RAISE EXCEPTION 'stepd: unknown time zone "%" for schedule %', NEW.tz, NEW.name
      USING ERRCODE = 'check_violation', HINT = 'Use an IANA name such as UTC or Europe/Paris.';
  END;
  EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I.flows WHERE name = $1)', TG_TABLE_SCHEMA)
    INTO missing USING NEW.flow;
  IF missing THEN
    RAISE EXCEPTION 'stepd: schedule % names flow "%", which is not registered', NEW.name, NEW.flow
      USING ERRCODE = 'check_violation', HINT = 'Register it first: stepd flow put FILE --name NAME';
  END IF;
  RETURN NEW;
END;
$$;

-- /metrics: stepd_gates_waiting and stepd_oldest_gate_age_seconds (src/db/queries/metrics.ts),
-- gates as listWorkflows counts them: pending, waiting for no child and no signal.
CREATE INDEX workflow_steps_waiting_gates_idx ON workflow_steps (created_at)
  WHERE status = 'pending' AND child_id IS NULL AND (args -> 'signal') IS NULL;
