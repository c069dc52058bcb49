-- stepd schema, part 17: closing what the attack suite found (docs/security.md).
--
--   redrive          only the role that created a failed workflow (created_role), a member of it,
--                    or a trusted role (stepd_role_is_trusted: executor members, the owner,
--                    superusers) may redrive it: a redrive runs the failed steps again as the
--                    workflow's created_by, so it is the creator's decision — the rule part 15
--                    applies to flow versions and schedules.
--   sizes            generous fixed ceilings on the stored size of flows and inputs, so an absurd
--                    row is refused at INSERT instead of being loaded by the executor. Measured
--                    with pg_column_size (the jsonb value's size: the binary value on an insert
--                    or a write of the column, the stored, possibly compressed, size of a value an
--                    update leaves alone — cheap, never detoasted). jsonb takes at most ~8× the
--                    bytes of its JSON text (small numbers), so the ceilings sit well above the
--                    config's maximums: a flow is at most 1 MiB of JSON (MAX_FLOW_BYTES), an input
--                    at most caps.inputBytes (≤ 8 MiB). NOT VALID: rows already stored are not
--                    scanned (a full scan under the migration's lock would stop the executor on a
--                    large table); every new row and every update is checked.
--   schedule_ticks   the last tick the scheduler started per schedule (executor-only: clients
--                    have no grant on it). A tick starts only when it is later than the recorded
--                    one, in the statement that records it, so a replayed or duplicate pg-boss
--                    job never starts an old tick again, even after its workflow was deleted.
--                    Kept when the schedule is removed: a schedule re-added under the same name
--                    never runs a tick at or before the last one started.
--   root_id          the top-level workflow of a sub-workflow tree (NULL on a top-level one), so
--                    caps.subWorkflows (child workflows per root) is one indexed count. Children
--                    started before this migration have none: their trees count from here on.

-- Redrive: the creator's decision.
CREATE FUNCTION stepd_guard_redrive_owner() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  trusted boolean;
BEGIN
  EXECUTE format('SELECT %I.stepd_role_is_trusted($1)', TG_TABLE_SCHEMA) INTO trusted USING session_user::text;
  IF coalesce(trusted, false)
     OR coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(OLD.created_role))::oid, 'MEMBER'), false) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'stepd: workflow % was started by role %; role % may not redrive it', OLD.id, coalesce(OLD.created_role, '(the executor)'), session_user
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'Only the role that started a workflow (or an operator) may redrive it; start a new workflow instead.';
END;
$$;

CREATE TRIGGER workflows_guard_redrive_owner
  BEFORE UPDATE OF status ON workflows
  FOR EACH ROW WHEN (OLD.status = 'failed' AND NEW.status = 'running' AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_guard_redrive_owner();

-- Sizes (16 MiB = 16777216 bytes, 64 MiB = 67108864 bytes).
ALTER TABLE flows ADD CONSTRAINT flows_flow_at_most_16_mib
  CHECK (pg_column_size(flow) <= 16777216) NOT VALID;
ALTER TABLE workflows ADD CONSTRAINT workflows_flow_at_most_16_mib
  CHECK (pg_column_size(flow) <= 16777216) NOT VALID;
ALTER TABLE workflows ADD CONSTRAINT workflows_input_at_most_64_mib
  CHECK (pg_column_size(input) <= 67108864) NOT VALID;
ALTER TABLE schedules ADD CONSTRAINT schedules_input_at_most_64_mib
  CHECK (pg_column_size(input) <= 67108864) NOT VALID;

-- The scheduler's record of started ticks.
CREATE TABLE schedule_ticks (
  name        text PRIMARY KEY,
  last_tick   timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Sub-workflow trees.
ALTER TABLE workflows ADD COLUMN root_id bigint;
CREATE INDEX workflows_root_idx ON workflows (root_id) WHERE root_id IS NOT NULL;
