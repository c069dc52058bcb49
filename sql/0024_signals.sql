-- stepd schema, part 24: signals, what happens in the world (docs/signals.md, docs/security.md).
--
--   signals          one row per signal a service sends, in the same transaction as its own
--                    business write: INSERT INTO signals (name, key, payload) VALUES (...).
--                    name    1..200 bytes, no control characters (U+0001-U+001F, U+007F-U+009F);
--                    key     optional, 1..500 bytes, no control characters;
--                    payload a JSON object (default {}), at most caps.inputBytes (SQLSTATE 54000,
--                            refused before the row exists, like a workflow's input);
--                    created_at, created_role  stamped by the database (now(), session_user)
--                            whatever the writer sends; clients may not name them at all.
--                    Clients INSERT (name, key, payload) and SELECT (src/db/roles.ts). A signal is
--                    an immutable fact: nobody updates a row, and only a trusted role (retention,
--                    an operator) deletes one (SQLSTATE 42501 otherwise).
--   matching         the index on (name, key, id) serves waits by name and key (sql/0025).

CREATE TABLE signals (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name          text NOT NULL,
  key           text,
  payload       jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  created_role  text NOT NULL DEFAULT session_user,
  CONSTRAINT signals_name_length CHECK (octet_length(name) BETWEEN 1 AND 200),
  CONSTRAINT signals_name_printable CHECK (name !~ '[\u0001-\u001F\u007F-\u009F]'),
  CONSTRAINT signals_key_length CHECK (key IS NULL OR octet_length(key) BETWEEN 1 AND 500),
  CONSTRAINT signals_key_printable CHECK (key IS NULL OR key !~ '[\u0001-\u001F\u007F-\u009F]'),
  CONSTRAINT signals_payload_is_object CHECK (jsonb_typeof(payload) = 'object')
);

CREATE INDEX signals_match_idx ON signals (name, key, id);

-- Who wrote and when: the database's word, whatever the INSERT said.
CREATE FUNCTION stepd_signals_stamp() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  NEW.created_role := session_user;
  NEW.created_at := pg_catalog.now();
  RETURN NEW;
END;
$$;

CREATE TRIGGER signals_stamp
  BEFORE INSERT ON signals
  FOR EACH ROW EXECUTE FUNCTION stepd_signals_stamp();

-- A signal is a fact: never rewritten; deleted only by a trusted role (retention, an operator).
CREATE FUNCTION stepd_signals_immutable() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  trusted pg_catalog.bool;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    RAISE EXCEPTION 'stepd: signal % cannot be changed; a signal is an immutable fact', OLD.id
      USING ERRCODE = 'insufficient_privilege', HINT = 'Send a new signal instead.';
  END IF;
  EXECUTE pg_catalog.format('SELECT %I.stepd_role_is_trusted($1)', TG_TABLE_SCHEMA) INTO trusted USING session_user::pg_catalog.text;
  IF NOT coalesce(trusted, false) THEN
    RAISE EXCEPTION 'stepd: role % may not delete signal %; signals are removed only by retention', session_user, OLD.id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN OLD;
END;
$$;

CREATE TRIGGER signals_immutable
  BEFORE UPDATE OR DELETE ON signals
  FOR EACH ROW EXECUTE FUNCTION stepd_signals_immutable();

-- The size cap: stepd_refuse_oversize (sql/0021) re-created with a 'payload' branch (caps.inputBytes),
-- the rest as it was.
DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION %1$I.stepd_refuse_oversize() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      caps record;
      what text;
      cap_name text;
      cap bigint;
      v jsonb;
      over bigint;
      steps bigint;
    BEGIN
      SELECT coalesce(c.input_bytes, 1048576) AS input_bytes, coalesce(c.result_bytes, 4194304) AS result_bytes,
             coalesce(c.flow_bytes, 1048576) AS flow_bytes, coalesce(c.flow_steps, 2000) AS flow_steps
        INTO caps
        FROM (SELECT 1) AS d LEFT JOIN %1$I.size_caps AS c ON c.id;
      IF TG_ARGV[0] = 'input' THEN
        v := NEW.input; cap := caps.input_bytes; cap_name := 'caps.inputBytes';
        what := CASE TG_TABLE_NAME WHEN 'schedules' THEN 'the schedule''s input' ELSE 'the workflow''s input' END;
      ELSIF TG_ARGV[0] = 'payload' THEN
        v := NEW.payload; cap := caps.input_bytes; cap_name := 'caps.inputBytes';
        what := 'the signal''s payload';
      ELSIF TG_ARGV[0] = 'result' THEN
        v := NEW.result; cap := caps.result_bytes; cap_name := 'caps.resultBytes';
        what := format('the result of step %%s', NEW.id);
      ELSE
        v := NEW.flow; cap := caps.flow_bytes; cap_name := 'the flow size limit';
        what := CASE TG_TABLE_NAME WHEN 'flows' THEN format('flow %%L', NEW.name) ELSE 'the workflow''s flow' END;
      END IF;
      over := %1$I.stepd_json_bytes_above(v, cap);
      IF over IS NOT NULL THEN
        RAISE EXCEPTION 'stepd: %% is %% bytes as JSON, above %% (%% bytes)', what, over, cap_name, cap
          USING ERRCODE = 'program_limit_exceeded',
                DETAIL = format('cap=%%s limit=%%s actual=%%s', cap_name, cap, over),
                HINT = 'The operator sets the caps in the "caps" section of stepd.config.json; see docs/caps-and-budgets.md.';
      END IF;
      IF TG_ARGV[0] = 'flow' THEN
        steps := %1$I.stepd_flow_steps_above(v, caps.flow_steps);
        IF steps IS NOT NULL THEN
          RAISE EXCEPTION 'stepd: %% defines %% steps, above caps.flowSteps (%%)', what, steps, caps.flow_steps
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = format('cap=caps.flowSteps limit=%%s actual=%%s', caps.flow_steps, steps),
                  HINT = 'The operator sets the caps in the "caps" section of stepd.config.json; see docs/caps-and-budgets.md.';
        END IF;
      END IF;
      RETURN NEW;
    END;
    $body$ $f$, s);
END;
$migration$;

-- As for inputs, a payload of at most 4 KiB of uncompressed jsonb never calls the function. Every
-- writer is checked, the executor's role too (it never sends signals on its own behalf).
CREATE TRIGGER signals_refuse_oversize_payload
  BEFORE INSERT ON signals
  FOR EACH ROW WHEN (pg_column_size(NEW.payload) > 4096 OR pg_column_compression(NEW.payload) IS NOT NULL)
  EXECUTE FUNCTION stepd_refuse_oversize('payload');
