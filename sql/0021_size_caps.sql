-- stepd schema, part 21: sizes checked before work (docs/caps-and-budgets.md, docs/security.md).
--
--   size_caps        one row: the operator's caps on what a client may write, as the executor
--                    read them from its config (caps.inputBytes, caps.resultBytes, caps.flowSteps
--                    and the fixed flow size, MAX_FLOW_BYTES). Every executor writes it when it
--                    starts; until one has, the defaults below (equal to DEFAULT_CAPS in
--                    src/flow/caps.ts) apply. Clients may read it (the checks run as the writer);
--                    only <schema>_executor may change it, through its grant on every table.
--   refusals         BEFORE INSERT/UPDATE triggers refuse, before the row exists and so before
--                    any executor loads it, a client's workflow input or flow, a registered flow
--                    version, a schedule's input, and a result written when a client readies a
--                    pending step, when it is above its cap (SQLSTATE 54000, the message names the
--                    cap and the size), and a flow with more steps than caps.flowSteps. The
--                    executor's own writes are not checked here (it checks them itself).
--   the measure      cheap on every write: pg_column_size of the value being written (its binary
--                    jsonb size, O(1), never detoasted); values of at most 4 KiB skip the function. jsonb takes at most ~6x the bytes of the
--                    JSON text the executor measures (arrays of zeros), and at least 0.8x (arrays
--                    of null), so: at most the cap -> accepted at once (the executor still checks
--                    it exactly); above 8x the cap -> refused at once; in between, or when the
--                    value arrives compressed (copied from another table), the value is written
--                    as text once and its compact size counted (PostgreSQL's ", " and ": " and
--                    escapes taken back out), a lower bound of what the executor would measure.

CREATE TABLE size_caps (
  id            boolean PRIMARY KEY DEFAULT true,
  input_bytes   bigint NOT NULL DEFAULT 1048576,
  result_bytes  bigint NOT NULL DEFAULT 4194304,
  flow_bytes    bigint NOT NULL DEFAULT 1048576,
  flow_steps    integer NOT NULL DEFAULT 2000,
  written_by    text,
  written_at    timestamptz,
  CONSTRAINT size_caps_one_row CHECK (id),
  CONSTRAINT size_caps_positive CHECK (input_bytes > 0 AND result_bytes > 0 AND flow_bytes > 0 AND flow_steps > 0)
);
INSERT INTO size_caps DEFAULT VALUES;

-- The JSON size of `v` when it is above `cap` bytes (a lower bound of what the executor's
-- measureJson counts), NULL when it is not. Costs O(1) unless v is within 8x of the cap or
-- compressed. STABLE, not IMMUTABLE: the coarse answer above 8x depends on how v is stored.
CREATE FUNCTION stepd_json_bytes_above(v jsonb, cap bigint) RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  stored bigint;
  t text;
  u text;
  n bigint;
BEGIN
  IF v IS NULL THEN RETURN NULL; END IF;
  stored := pg_catalog.pg_column_size(v);
  IF pg_catalog.pg_column_compression(v) IS NULL THEN
    IF stored <= cap THEN RETURN NULL; END IF;
    IF stored > 8 * cap THEN RETURN (stored + 7) / 8; END IF;
  END IF;
  t := v::text;
  n := pg_catalog.octet_length(t);
  IF n <= cap THEN RETURN NULL; END IF;
  -- PostgreSQL writes "\\" for a backslash, "\n", "\"" … for one byte, "\u001f" for one byte.
  u := pg_catalog.replace(t, '\\', '');
  n := n - (pg_catalog.octet_length(t) - pg_catalog.octet_length(u)) / 2
         - (pg_catalog.octet_length(u) - pg_catalog.octet_length(pg_catalog.replace(u, '\', '')))
         - 4 * ((pg_catalog.octet_length(u) - pg_catalog.octet_length(pg_catalog.replace(u, '\u', ''))) / 2);
  -- and ", " / ": " where compact JSON has "," / ":" (inside strings too: a lower bound).
  n := n - (pg_catalog.octet_length(t) - pg_catalog.octet_length(pg_catalog.replace(t, ', ', ''))) / 2
         - (pg_catalog.octet_length(t) - pg_catalog.octet_length(pg_catalog.replace(t, ': ', ''))) / 2;
  IF n <= cap THEN RETURN NULL; END IF;
  RETURN n;
END;
$$;

-- How many steps `flow` defines when that is more than `cap`, NULL otherwise. Counted only when
-- the flow is large enough to hold that many (a step takes at least 8 bytes of jsonb); a flow
-- stored as JSON text is read once; a flow of no known form is left to the executor.
CREATE FUNCTION stepd_flow_steps_above(flow jsonb, cap integer) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  f jsonb := flow;
  n bigint;
BEGIN
  IF f IS NULL THEN RETURN NULL; END IF;
  IF pg_catalog.jsonb_typeof(f) = 'string' THEN
    BEGIN
      f := (f OPERATOR(pg_catalog.#>>) '{}'::text[])::jsonb;
    EXCEPTION WHEN others THEN
      RETURN NULL;
    END;
  ELSIF pg_catalog.pg_column_compression(f) IS NULL AND pg_catalog.pg_column_size(f) <= 8::bigint * cap THEN
    RETURN NULL;
  END IF;
  IF pg_catalog.jsonb_typeof(f) IS DISTINCT FROM 'object' THEN RETURN NULL; END IF;
  IF pg_catalog.jsonb_typeof(f OPERATOR(pg_catalog.->) 'start') = 'object' THEN
    -- The seed's flat form: every key is a step.
    SELECT pg_catalog.count(*) INTO n FROM pg_catalog.jsonb_object_keys(f);
  ELSIF pg_catalog.jsonb_typeof(f OPERATOR(pg_catalog.->) 'steps') = 'object' THEN
    SELECT pg_catalog.count(*) INTO n FROM pg_catalog.jsonb_object_keys(f OPERATOR(pg_catalog.->) 'steps');
  ELSE
    RETURN NULL;
  END IF;
  IF n > cap THEN RETURN n; END IF;
  RETURN NULL;
END;
$$;

-- The trigger: TG_ARGV[0] names the column to check (input, flow or result). Created with the
-- schema baked in, so the caps it reads cannot be shadowed by the writer's search_path.
DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  EXECUTE format($f$
    CREATE FUNCTION %1$I.stepd_refuse_oversize() RETURNS trigger
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

-- The WHEN clause keeps the common case free: a value of at most 4 KiB of jsonb that arrived
-- uncompressed never calls the function (measured: the function costs about 40 us a row, most of
-- it reading size_caps; a bulk insert of 10,000 small workflows pays nothing). Such a value is
-- far below any sensible cap, and the executor still measures it exactly at admission.
CREATE TRIGGER workflows_refuse_oversize_input
  BEFORE INSERT OR UPDATE OF input ON workflows
  FOR EACH ROW WHEN ((pg_column_size(NEW.input) > 4096 OR pg_column_compression(NEW.input) IS NOT NULL) AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_refuse_oversize('input');
CREATE TRIGGER workflows_refuse_oversize_flow
  BEFORE INSERT OR UPDATE OF flow ON workflows
  FOR EACH ROW WHEN ((pg_column_size(NEW.flow) > 4096 OR pg_column_compression(NEW.flow) IS NOT NULL) AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_refuse_oversize('flow');
CREATE TRIGGER flows_refuse_oversize_flow
  BEFORE INSERT OR UPDATE OF flow ON flows
  FOR EACH ROW WHEN ((pg_column_size(NEW.flow) > 4096 OR pg_column_compression(NEW.flow) IS NOT NULL) AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_refuse_oversize('flow');
CREATE TRIGGER schedules_refuse_oversize_input
  BEFORE INSERT OR UPDATE OF input ON schedules
  FOR EACH ROW WHEN ((pg_column_size(NEW.input) > 4096 OR pg_column_compression(NEW.input) IS NOT NULL) AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_refuse_oversize('input');
CREATE TRIGGER workflow_steps_refuse_oversize_result
  BEFORE UPDATE OF result ON workflow_steps
  FOR EACH ROW WHEN ((pg_column_size(NEW.result) > 4096 OR pg_column_compression(NEW.result) IS NOT NULL) AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_refuse_oversize('result');
