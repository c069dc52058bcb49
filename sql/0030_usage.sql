-- stepd schema, part 30: usage and cost on every row (docs/ai-steps.md).
--
--   workflow_steps.usage   what one attempt spent: {"model"?, "inputTokens", "outputTokens",
--                          "cost"} (cost in the currency of the config's prices). Written by the
--                          executor with the attempt's outcome: llm.chat reports it, so may an
--                          MCP tool (`_meta.usage`) or any tool whose result has a `usage`.
--   workflows.usage        the sum of its steps' usage, sub-workflows included: when a step ends
--                          (running → done/failed) with a usage, the trigger below adds it to its
--                          workflow's row, in the same statement, so in the outcome transaction
--                          (which holds that row's lock already: no new lock is taken). A
--                          sub-workflow step ends with its child's whole usage (the child has
--                          ended by then), so a parent's usage includes its children once they
--                          have ended, and the sum never counts a step twice.
--
-- Clients never write either column: a workflow inserted with a usage, or an update that
-- changes one, is refused unless it is the executor's (the guards below, as part 10 guards
-- progress). Budgets (flow `budget.cost`, config `llm.budgets`) read workflows.usage.

ALTER TABLE workflow_steps ADD COLUMN usage jsonb;
ALTER TABLE workflows ADD COLUMN usage jsonb;

ALTER TABLE workflow_steps ADD CONSTRAINT workflow_steps_usage_is_object
  CHECK (usage IS NULL OR (jsonb_typeof(usage) = 'object' AND jsonb_typeof(usage -> 'cost') = 'number'));
ALTER TABLE workflows ADD CONSTRAINT workflows_usage_is_object
  CHECK (usage IS NULL OR (jsonb_typeof(usage) = 'object' AND jsonb_typeof(usage -> 'cost') = 'number'));

-- a + b, field by field (tokens and cost); either may be NULL. No model: a sum spans models.
CREATE FUNCTION stepd_usage_add(a jsonb, b jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN b IS NULL THEN a ELSE pg_catalog.jsonb_build_object(
    'inputTokens', coalesce((a ->> 'inputTokens')::pg_catalog.numeric, 0) + coalesce((b ->> 'inputTokens')::pg_catalog.numeric, 0),
    'outputTokens', coalesce((a ->> 'outputTokens')::pg_catalog.numeric, 0) + coalesce((b ->> 'outputTokens')::pg_catalog.numeric, 0),
    'cost', coalesce((a ->> 'cost')::pg_catalog.numeric, 0) + coalesce((b ->> 'cost')::pg_catalog.numeric, 0)) END
$$;

-- A result's `usage` as a step's usage, or NULL (the same reading as normalizeUsage in
-- src/usage/stepUsage.ts): for writers of step outcomes in SQL (a worker's finish) that record
-- what a tool reported in its result: `usage = stepd_usage_of(result)`.
CREATE FUNCTION stepd_usage_of(result jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  u pg_catalog.jsonb := CASE WHEN pg_catalog.jsonb_typeof(result -> 'usage') = 'object' THEN result -> 'usage' END;
  v pg_catalog.jsonb[];
  n pg_catalog.numeric[] := ARRAY[NULL, NULL, NULL]::pg_catalog.numeric[];
  limits pg_catalog.numeric[] := ARRAY[1e12, 1e12, 1e9];
BEGIN
  IF u IS NULL THEN RETURN NULL; END IF;
  -- The first of each name that is present and not JSON null, as `??` reads them.
  v := ARRAY[
    coalesce(NULLIF(u -> 'inputTokens', 'null'::pg_catalog.jsonb), NULLIF(u -> 'input_tokens', 'null'::pg_catalog.jsonb), u -> 'prompt_tokens'),
    coalesce(NULLIF(u -> 'outputTokens', 'null'::pg_catalog.jsonb), NULLIF(u -> 'output_tokens', 'null'::pg_catalog.jsonb), u -> 'completion_tokens'),
    u -> 'cost'];
  FOR k IN 1..3 LOOP
    IF pg_catalog.jsonb_typeof(v[k]) = 'number' AND v[k]::pg_catalog.numeric >= 0 THEN
      n[k] := least(v[k]::pg_catalog.numeric, limits[k]);
    END IF;
  END LOOP;
  IF n[1] IS NULL AND n[2] IS NULL AND n[3] IS NULL THEN RETURN NULL; END IF;
  RETURN pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'model', CASE WHEN pg_catalog.jsonb_typeof(u -> 'model') = 'string' AND u ->> 'model' <> '' THEN pg_catalog.left(u ->> 'model', 200) END,
    'inputTokens', pg_catalog.round(coalesce(n[1], 0)), 'outputTokens', pg_catalog.round(coalesce(n[2], 0)), 'cost', coalesce(n[3], 0)));
END;
$$;

-- A step ends: a sub-workflow step takes its child's usage; a usage is added to the workflow.
CREATE FUNCTION stepd_roll_up_usage() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NEW.usage IS NULL AND NEW.child_id IS NOT NULL THEN
    EXECUTE pg_catalog.format('SELECT usage FROM %I.workflows WHERE id = $1', TG_TABLE_SCHEMA) INTO NEW.usage USING NEW.child_id;
  END IF;
  IF NEW.usage IS NOT NULL THEN
    EXECUTE pg_catalog.format('UPDATE %1$I.workflows SET usage = %1$I.stepd_usage_add(usage, $2) WHERE id = $1', TG_TABLE_SCHEMA)
      USING NEW.workflow_id, NEW.usage;
  END IF;
  RETURN NEW;
END;
$$;

-- Usage is the executor's to write.
CREATE FUNCTION stepd_guard_usage() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF (TG_OP = 'INSERT' AND NEW.usage IS NOT NULL) OR (TG_OP = 'UPDATE' AND NEW.usage IS DISTINCT FROM OLD.usage) THEN
    RAISE EXCEPTION 'stepd: the usage of a % row is written by the executor only', TG_TABLE_NAME
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$;

-- The two pure functions stay callable (the executor role runs the sum in its own session); the
-- trigger functions are called by nobody.
REVOKE ALL ON FUNCTION stepd_roll_up_usage(), stepd_guard_usage() FROM PUBLIC;

DO $migration$
BEGIN
  EXECUTE format($f$CREATE TRIGGER workflow_steps_roll_up_usage
    BEFORE UPDATE OF status ON %1$I.workflow_steps
    FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status IN ('done', 'failed') AND (NEW.usage IS NOT NULL OR NEW.child_id IS NOT NULL))
    EXECUTE FUNCTION %1$I.stepd_roll_up_usage()$f$, current_schema());
  EXECUTE format($f$CREATE TRIGGER workflow_steps_guard_usage
    BEFORE UPDATE OF usage ON %1$I.workflow_steps
    FOR EACH ROW WHEN (NOT %1$I.stepd_is_executor())
    EXECUTE FUNCTION %1$I.stepd_guard_usage()$f$, current_schema());
  EXECUTE format($f$CREATE TRIGGER workflows_guard_usage
    BEFORE INSERT OR UPDATE OF usage ON %1$I.workflows
    FOR EACH ROW WHEN (NOT %1$I.stepd_is_executor())
    EXECUTE FUNCTION %1$I.stepd_guard_usage()$f$, current_schema());
END;
$migration$;
