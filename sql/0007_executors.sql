-- stepd schema, part 7: executor liveness. Each executor registers a row when it starts, beats
-- (sets last_beat_at) every few seconds while it runs and deletes its row on a clean shutdown.
-- The leader's watchdog rescues the running steps of an executor that has not beaten for its
-- dead_after_ms, whatever their lease (DESIGN.md §8). Executor bookkeeping: not part of the SQL
-- contract; other services may read it (who is running, since when, on which host).

CREATE TABLE executors (
  id                    text PRIMARY KEY,
  started_at            timestamptz NOT NULL DEFAULT now(),
  last_beat_at          timestamptz NOT NULL DEFAULT now(),
  host                  text NOT NULL,
  pid                   integer NOT NULL,
  -- The executor's own settings: it declares how often it beats and after how long without a
  -- beat it may be presumed dead, so executors with different settings judge each other right.
  heartbeat_interval_ms integer NOT NULL,
  dead_after_ms         integer NOT NULL,
  concurrency           integer,
  version               text,

  CONSTRAINT executors_id_not_empty CHECK (length(id) > 0),
  CONSTRAINT executors_beat_after_start CHECK (last_beat_at >= started_at),
  CONSTRAINT executors_pid_positive CHECK (pid > 0),
  CONSTRAINT executors_intervals_positive CHECK (heartbeat_interval_ms > 0 AND dead_after_ms > heartbeat_interval_ms)
);

-- The watchdog's question: who stopped beating.
CREATE INDEX executors_last_beat_idx ON executors (last_beat_at);

-- Running steps by owner: the rescue of a dead executor's steps, and recovery at start-up.
CREATE INDEX workflow_steps_running_executor_idx ON workflow_steps (executor_id) WHERE status = 'running';
