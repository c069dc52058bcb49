-- stepd schema, part 8: fair claims.
--
-- The hot claim takes the oldest ready steps (workflow_steps_ready_idx). When one workflow holds
-- most of them (a forEach with thousands of items ready), the executor alternates with a fair
-- claim that visits the workflows with ready steps round-robin, a few rows each: it walks this
-- index one workflow at a time (a skip scan), so it costs O(workflows visited), not O(rows ready).
-- Partial like the hot index: a row enters it only while it is ready.
CREATE INDEX workflow_steps_ready_workflow_idx ON workflow_steps (workflow_id, ready_at, id) WHERE status = 'ready';

-- Steps without a tool (readied gates, due timers) complete at once and take no tool slot: an
-- executor whose slots are all busy still claims them, through this small index.
CREATE INDEX workflow_steps_ready_toolless_idx ON workflow_steps (ready_at, id) WHERE status = 'ready' AND tool IS NULL;
