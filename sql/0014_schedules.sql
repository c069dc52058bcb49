-- stepd schema, part 14: schedules (docs/schedules.md).
--
--   schedules   what each named schedule starts and as whom. The cron itself runs on pg-boss,
--               in the schema <schema>_boss beside this one (installed by `stepd migrate`):
--               `stepd schedule add` writes this row and the pg-boss schedule in one
--               transaction. At each tick the daemon inserts one workflow with the key
--               'schedule:NAME:<tick time>', flow NULL (the latest registered version of
--               `flow`), this row's input and created_by, and created_role = this row's
--               created_role, so admission applies the same `clients.actAs` rules to the role
--               that wrote the schedule as to a role that inserts a workflow itself.
--   created_role  session_user of the insert or last update, set here; nobody can choose it.
--
-- The row is the source of truth for what runs: a pg-boss job that names a schedule without a
-- row here starts nothing, and the tick time is computed from this row's cron and time zone.

CREATE TABLE schedules (
  name          text PRIMARY KEY,
  cron          text NOT NULL,
  tz            text NOT NULL DEFAULT 'UTC',
  flow          text NOT NULL,
  input         jsonb NOT NULL DEFAULT '{}',
  created_by    text,
  created_role  text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- The name is also the pg-boss schedule key and part of each workflow's idempotency key.
  CONSTRAINT schedules_name_valid CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$'),
  CONSTRAINT schedules_cron_length CHECK (length(cron) BETWEEN 1 AND 200),
  CONSTRAINT schedules_flow_valid CHECK (length(flow) BETWEEN 1 AND 200),
  CONSTRAINT schedules_input_is_object CHECK (jsonb_typeof(input) = 'object')
);

-- Stamps who wrote the row and refuses what the database can judge: an unknown time zone, a
-- flow that is not registered. (The cron expression is checked by pg-boss when it is scheduled.)
CREATE FUNCTION stepd_schedules_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  missing boolean;
BEGIN
  NEW.created_role := session_user;
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

CREATE TRIGGER schedules_stamp
  BEFORE INSERT OR UPDATE ON schedules
  FOR EACH ROW EXECUTE FUNCTION stepd_schedules_stamp();
