-- stepd schema, part 1: the two tables of the SQL contract and their indexes.
-- The migrator runs this with search_path set to the configured schema (stepd by default).

CREATE TABLE workflows (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name          text NOT NULL,
  flow          jsonb NOT NULL,
  input         jsonb NOT NULL DEFAULT '{}'::jsonb,
  status        text NOT NULL DEFAULT 'new',
  output        jsonb,
  error         jsonb,
  created_by    text,
  key           text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  started_at    timestamptz,
  completed_at  timestamptz,
  cancelled_at  timestamptz,
  -- executor bookkeeping (not part of the contract; read-only for others)
  deadline_at   timestamptz,
  step_count    integer NOT NULL DEFAULT 0,

  CONSTRAINT workflows_key_unique UNIQUE (key),
  CONSTRAINT workflows_status_valid
    CHECK (status IN ('new', 'running', 'completed', 'failed', 'cancelled')),
  CONSTRAINT workflows_name_not_empty CHECK (length(name) > 0),
  CONSTRAINT workflows_input_is_object CHECK (jsonb_typeof(input) = 'object'),
  CONSTRAINT workflows_started_after_created
    CHECK (started_at IS NULL OR started_at >= created_at),
  CONSTRAINT workflows_completed_after_started
    CHECK (completed_at IS NULL OR started_at IS NULL OR completed_at >= started_at),
  CONSTRAINT workflows_finished_has_completed_at
    CHECK (status NOT IN ('completed', 'failed') OR completed_at IS NOT NULL),
  CONSTRAINT workflows_cancelled_has_cancelled_at
    CHECK (status <> 'cancelled' OR cancelled_at IS NOT NULL),
  CONSTRAINT workflows_failed_has_error
    CHECK (status <> 'failed' OR error IS NOT NULL),
  CONSTRAINT workflows_step_count_not_negative CHECK (step_count >= 0)
);

CREATE TABLE workflow_steps (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workflow_id   bigint NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
  name          text NOT NULL,
  tool          text,
  args          jsonb,
  result        jsonb,
  error         jsonb,
  status        text NOT NULL DEFAULT 'pending',
  attempt       integer NOT NULL DEFAULT 1,
  ready_at      timestamptz,
  started_at    timestamptz,
  completed_at  timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  lease_until   timestamptz,
  executor_id   text,
  fanout_id     bigint REFERENCES workflow_steps (id) ON DELETE CASCADE,
  item_index    integer,
  expires_at    timestamptz,
  readied_by    text,
  readied_at    timestamptz,
  -- executor bookkeeping (not part of the contract): this row fanned out and its fan-out has
  -- not settled yet, so the fan-out enclosing it must wait.
  fanout_open   boolean NOT NULL DEFAULT false,

  CONSTRAINT workflow_steps_status_valid
    CHECK (status IN ('pending', 'ready', 'running', 'done', 'failed', 'cancelled')),
  CONSTRAINT workflow_steps_attempt_positive CHECK (attempt >= 1),
  CONSTRAINT workflow_steps_ready_has_ready_at CHECK (status <> 'ready' OR ready_at IS NOT NULL),
  CONSTRAINT workflow_steps_running_has_lease
    CHECK (status <> 'running' OR (lease_until IS NOT NULL AND executor_id IS NOT NULL AND started_at IS NOT NULL)),
  CONSTRAINT workflow_steps_finished_has_completed_at
    CHECK (status NOT IN ('done', 'failed', 'cancelled') OR completed_at IS NOT NULL),
  CONSTRAINT workflow_steps_failed_has_error CHECK (status <> 'failed' OR error IS NOT NULL),
  CONSTRAINT workflow_steps_started_after_created
    CHECK (started_at IS NULL OR started_at >= created_at),
  CONSTRAINT workflow_steps_completed_after_started
    CHECK (completed_at IS NULL OR started_at IS NULL OR completed_at >= started_at),
  CONSTRAINT workflow_steps_item_index_not_negative CHECK (item_index IS NULL OR item_index >= 0)
);

-- The hot path: claimable steps, oldest first. Partial, so finished rows never slow it down.
CREATE INDEX workflow_steps_ready_idx ON workflow_steps (ready_at, id) WHERE status = 'ready';
-- The watchdog's scan of running leases.
CREATE INDEX workflow_steps_running_lease_idx ON workflow_steps (lease_until) WHERE status = 'running';
-- Gates with a deadline.
CREATE INDEX workflow_steps_pending_expiry_idx ON workflow_steps (expires_at)
  WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Per-workflow lookups: latest attempt of a step by name, live steps of a workflow.
CREATE INDEX workflow_steps_workflow_name_idx ON workflow_steps (workflow_id, name, id);
-- Join bookkeeping: the rows of one fan-out instance, and those of them still in progress
-- (live, or a nested fan-out that has not settled), so a join check reads O(live) rows.
CREATE INDEX workflow_steps_fanout_idx ON workflow_steps (fanout_id, item_index) WHERE fanout_id IS NOT NULL;
CREATE INDEX workflow_steps_fanout_unsettled_idx ON workflow_steps (fanout_id)
  WHERE fanout_id IS NOT NULL AND (status IN ('pending', 'ready', 'running') OR fanout_open);

-- Admission of new workflows.
CREATE INDEX workflows_new_idx ON workflows (id) WHERE status = 'new';
-- Workflow deadlines.
CREATE INDEX workflows_deadline_idx ON workflows (deadline_at) WHERE status = 'running' AND deadline_at IS NOT NULL;
-- Listing by status, newest first.
CREATE INDEX workflows_status_created_idx ON workflows (status, id DESC);
