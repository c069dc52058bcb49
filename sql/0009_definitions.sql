-- stepd schema, part 9: definitions, composition, schedules and redrive (the columns and the
-- guard; the executor's side lives in src/).
--
--   flows              the registry: immutable, numbered versions of named flows. Anyone with
--                      the client role may add a version (the executor validates every flow
--                      again at admission); nobody rewrites one.
--   workflows.flow     may be NULL on insert: the row then starts the latest version of the
--                      registered flow named `name` (or `flow_version`), copied into `flow` and
--                      pinned at admission, so later versions never change a running workflow.
--   workflows.start_at a workflow is admitted no earlier than this (`stepd run --at`).
--   workflows.parent_id, parent_step_id, depth
--                      a sub-workflow's parent and the parent's step that waits for it; set by
--                      the executor only.
--   workflows.redrive_requested_at, redrives
--                      redrive: a client may set a failed workflow back to 'running'
--                      (UPDATE workflows SET status = 'running' WHERE id = $1 AND status = 'failed');
--                      the guard stamps the request and the executor gives the failed steps new
--                      attempts (or refuses, putting the workflow back to failed with the reason).

CREATE TABLE flows (
  name          text NOT NULL,
  version       integer NOT NULL,
  flow          jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  created_by    text,
  created_role  text,
  CONSTRAINT flows_pkey PRIMARY KEY (name, version),
  CONSTRAINT flows_name_valid CHECK (length(name) BETWEEN 1 AND 200),
  CONSTRAINT flows_version_positive CHECK (version >= 1),
  CONSTRAINT flows_flow_is_object CHECK (jsonb_typeof(flow) = 'object')
);

-- Versions are numbered by the database (1, 2, … per name, under a per-name lock, so concurrent
-- writers never collide) and stamped with who wrote them; they never change afterwards.
CREATE FUNCTION stepd_flows_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('stepd.flows'), pg_catalog.hashtext(TG_TABLE_SCHEMA || '.' || NEW.name));
  EXECUTE format('SELECT coalesce(max(version), 0) + 1 FROM %I.flows WHERE name = $1', TG_TABLE_SCHEMA)
    INTO NEW.version USING NEW.name;
  NEW.created_at := now();
  NEW.created_role := session_user;
  NEW.created_by := coalesce(NEW.created_by, session_user);
  RETURN NEW;
END;
$$;

CREATE TRIGGER flows_number_versions
  BEFORE INSERT ON flows
  FOR EACH ROW EXECUTE FUNCTION stepd_flows_insert();

CREATE FUNCTION stepd_flows_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'stepd: flow versions are immutable; store a new version instead (stepd flow put)'
    USING ERRCODE = 'check_violation';
END;
$$;

CREATE TRIGGER flows_immutable
  BEFORE UPDATE ON flows
  FOR EACH ROW EXECUTE FUNCTION stepd_flows_immutable();

ALTER TABLE workflows ALTER COLUMN flow DROP NOT NULL;
ALTER TABLE workflows ADD COLUMN flow_version integer;
ALTER TABLE workflows ADD COLUMN start_at timestamptz;
ALTER TABLE workflows ADD COLUMN parent_id bigint REFERENCES workflows (id) ON DELETE CASCADE;
ALTER TABLE workflows ADD COLUMN parent_step_id bigint;
ALTER TABLE workflows ADD COLUMN depth integer NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN redrive_requested_at timestamptz;
ALTER TABLE workflows ADD COLUMN redrives integer NOT NULL DEFAULT 0;

ALTER TABLE workflows ADD CONSTRAINT workflows_admitted_has_flow
  CHECK (flow IS NOT NULL OR status IN ('new', 'failed', 'cancelled'));
ALTER TABLE workflows ADD CONSTRAINT workflows_flow_version_positive
  CHECK (flow_version IS NULL OR flow_version >= 1);
ALTER TABLE workflows ADD CONSTRAINT workflows_depth_not_negative CHECK (depth >= 0);
ALTER TABLE workflows ADD CONSTRAINT workflows_child_has_parent_step
  CHECK ((parent_id IS NULL) = (parent_step_id IS NULL));

-- A parent's children (cancel cascade, status trees), and the executor's redrive queue.
CREATE INDEX workflows_parent_idx ON workflows (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX workflows_redrive_idx ON workflows (redrive_requested_at) WHERE redrive_requested_at IS NOT NULL;
-- Admission of workflows that wait for their start time.
CREATE INDEX workflows_start_at_idx ON workflows (start_at) WHERE status = 'new' AND start_at IS NOT NULL;

-- The guard for clients, as in part 6 plus: the new insertable columns (flow_version, start_at),
-- executor-only columns (parent_id, parent_step_id, depth, redrive_*), and redrive.
CREATE OR REPLACE FUNCTION stepd_guard_workflows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.status NOT IN ('completed', 'failed', 'cancelled') THEN
      RAISE EXCEPTION 'stepd: workflow % is %; only completed, failed or cancelled workflows can be deleted', OLD.id, OLD.status
        USING ERRCODE = 'check_violation', HINT = 'Cancel it first: UPDATE workflows SET status = ''cancelled'' WHERE id = ...';
    END IF;
    RETURN OLD;
  END IF;

  IF TG_OP = 'INSERT' THEN
    -- Timestamps and the writing role are stepd's.
    NEW.created_at := now();
    NEW.updated_at := now();
    NEW.created_role := session_user;
    IF NEW.status <> 'new' THEN
      RAISE EXCEPTION 'stepd: a new workflow must be inserted with status ''new'' (got %)', NEW.status
        USING ERRCODE = 'check_violation', HINT = 'Leave status out; the executor sets it.';
    END IF;
    IF NEW.output IS NOT NULL OR NEW.error IS NOT NULL OR NEW.started_at IS NOT NULL
       OR NEW.completed_at IS NOT NULL OR NEW.cancelled_at IS NOT NULL
       OR NEW.deadline_at IS NOT NULL OR NEW.step_count <> 0
       OR NEW.parent_id IS NOT NULL OR NEW.parent_step_id IS NOT NULL OR NEW.depth <> 0
       OR NEW.redrive_requested_at IS NOT NULL OR NEW.redrives <> 0 THEN
      RAISE EXCEPTION 'stepd: a new workflow may set only name, flow, flow_version, input, created_by, key and start_at'
        USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
  END IF;

  -- UPDATE
  NEW.updated_at := now();
  IF OLD.status <> 'new' AND NEW.flow IS DISTINCT FROM OLD.flow THEN
    RAISE EXCEPTION 'stepd: the flow of workflow % is frozen: it was admitted and is %', OLD.id, OLD.status
      USING ERRCODE = 'check_violation', HINT = 'Start a new workflow with the new flow instead.';
  END IF;
  IF NEW.id <> OLD.id OR NEW.output IS DISTINCT FROM OLD.output OR NEW.error IS DISTINCT FROM OLD.error
     OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.completed_at IS DISTINCT FROM OLD.completed_at
     OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.deadline_at IS DISTINCT FROM OLD.deadline_at
     OR NEW.step_count IS DISTINCT FROM OLD.step_count OR NEW.created_role IS DISTINCT FROM OLD.created_role
     OR NEW.parent_id IS DISTINCT FROM OLD.parent_id OR NEW.parent_step_id IS DISTINCT FROM OLD.parent_step_id
     OR NEW.depth IS DISTINCT FROM OLD.depth OR NEW.redrive_requested_at IS DISTINCT FROM OLD.redrive_requested_at
     OR NEW.redrives IS DISTINCT FROM OLD.redrives THEN
    RAISE EXCEPTION 'stepd: workflow % may not be changed that way; outside the executor only status may be set (to ''cancelled'', or from ''failed'' to ''running'' to redrive)', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;

  IF NEW.status IS DISTINCT FROM OLD.status THEN
    IF NEW.name IS DISTINCT FROM OLD.name OR NEW.flow IS DISTINCT FROM OLD.flow OR NEW.input IS DISTINCT FROM OLD.input
       OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.key IS DISTINCT FROM OLD.key
       OR NEW.flow_version IS DISTINCT FROM OLD.flow_version OR NEW.start_at IS DISTINCT FROM OLD.start_at THEN
      RAISE EXCEPTION 'stepd: changing the status of workflow % must not change its other columns', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
    -- Redrive: a failed workflow goes on from its failed steps (the executor does the rest).
    IF NEW.status = 'running' THEN
      IF OLD.status <> 'failed' THEN
        RAISE EXCEPTION 'stepd: workflow % is %; only a failed workflow can be redriven', OLD.id, OLD.status
          USING ERRCODE = 'check_violation';
      END IF;
      IF OLD.flow IS NULL THEN
        RAISE EXCEPTION 'stepd: workflow % failed before it was admitted (%); start a new one instead', OLD.id, OLD.error->>'code'
          USING ERRCODE = 'check_violation';
      END IF;
      NEW.redrive_requested_at := now();
      RETURN NEW;
    END IF;
    IF NEW.status <> 'cancelled' THEN
      RAISE EXCEPTION 'stepd: workflow % can only be set to ''cancelled'' (or redriven from ''failed'' to ''running'') from outside the executor (got %)', OLD.id, NEW.status
        USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.status NOT IN ('new', 'running') THEN
      RAISE EXCEPTION 'stepd: workflow % is already %; only new or running workflows can be cancelled', OLD.id, OLD.status
        USING ERRCODE = 'check_violation';
    END IF;
    NEW.cancelled_at := now();
    RETURN NEW;
  END IF;

  IF NEW.cancelled_at IS DISTINCT FROM OLD.cancelled_at THEN
    RAISE EXCEPTION 'stepd: cancelled_at is set by stepd; cancel with SET status = ''cancelled''' USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.name IS DISTINCT FROM OLD.name OR NEW.input IS DISTINCT FROM OLD.input
     OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.key IS DISTINCT FROM OLD.key
     OR NEW.flow IS DISTINCT FROM OLD.flow OR NEW.flow_version IS DISTINCT FROM OLD.flow_version
     OR NEW.start_at IS DISTINCT FROM OLD.start_at THEN
    IF OLD.status <> 'new' THEN
      RAISE EXCEPTION 'stepd: workflow % is %; only a workflow that is still ''new'' can be edited', OLD.id, OLD.status
        USING ERRCODE = 'check_violation';
    END IF;
    -- Whoever edits a new workflow answers for it at admission.
    NEW.created_role := session_user;
  END IF;
  RETURN NEW;
END;
$$;

-- A redrive wakes the executors as an insert does.
CREATE TRIGGER workflows_wakeup_on_redrive
  AFTER UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status = 'failed')
  EXECUTE FUNCTION stepd_notify_wakeup();
