-- stepd schema, part 19: fewer writes per workflow and per step (docs/performance.md).
--
--   wake-up on insert   one NOTIFY per INSERT statement instead of one per row: a client that
--                       inserts 10,000 workflows in one statement sent 10,000 notifications (about
--                       10 µs each in its own transaction, and as many for the executor to read);
--                       now one, naming the first new workflow. Executors only need to know that
--                       new workflows wait; they admit them oldest first in any case.
--   running index       the two partial indexes on running steps, by executor and by lease, become
--                       one, (executor_id, lease_until): every step claimed or created running
--                       wrote an entry in both. The watchdog's look for expired leases reads the
--                       whole (small: running steps only) index instead of its head.
--   fillfactor 90       workflow rows leave room in their page, so the updates that change no
--                       indexed column (a step counted, updated_at, a deadline) can be HOT: no new
--                       index entries. Pages written from now on; existing ones keep theirs.

DROP TRIGGER workflows_wakeup_on_insert ON workflows;

CREATE FUNCTION stepd_notify_new_workflows() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT coalesce(pg_catalog.current_setting('stepd.executor', true), '') = 'on' THEN
    PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
              'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME, 'id', n.id, 'status', 'new')::text)
       FROM (SELECT min(r.id) AS id FROM new_rows r WHERE r.status = 'new') n
      WHERE n.id IS NOT NULL;
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER workflows_wakeup_on_insert
  AFTER INSERT ON workflows
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT
  EXECUTE FUNCTION stepd_notify_new_workflows();

CREATE INDEX workflow_steps_running_idx ON workflow_steps (executor_id, lease_until) WHERE status = 'running';
DROP INDEX workflow_steps_running_executor_idx;
DROP INDEX workflow_steps_running_lease_idx;

ALTER TABLE workflows SET (fillfactor = 90);
