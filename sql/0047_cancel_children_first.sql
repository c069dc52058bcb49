-- stepd schema, part 47: a client's cancel of a parent takes its children's rows before its own
-- steps', so it never deadlocks with the executor ending one of those children.
--
-- Part 20's cascade cancelled the parent's live steps and, through each waiting sub-workflow
-- step's trigger (workflow_steps_cancel_child), then the child: the parent's row, its steps' rows,
-- the child's row, in that order. The executor ending a child holds the child's row and then
-- readies the parent's waiting step (workflows_settle_parent_step): the child's row, then the
-- parent's step's. Each held what the other wanted next, and PostgreSQL broke the cycle by failing
-- one of them with 40P01, most often the executor's outcome transaction, or the client's cancel
-- (test/integration/subworkflowCancelRace.test.ts). Now the cascade first cancels the children of
-- the parent's live steps, locked in id order as the executor's outcome batches lock workflows,
-- and then the steps: the parent's step is the last row
-- either side takes, so one waits for the other and both go through. A child cancelled here
-- readies nothing of its parent (its parent is already `cancelled` in this transaction) and the
-- step's own trigger then finds it cancelled already; the wake-up each cancelled child sends is
-- part 11's. Cancelling a workflow with no sub-workflow steps costs one indexed read more.

CREATE OR REPLACE FUNCTION stepd_cancel_steps() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  previous pg_catalog.text := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
  child pg_catalog.int8;
BEGIN
  PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
  FOR child IN EXECUTE pg_catalog.format(
    'WITH live AS (SELECT c.id FROM %1$I.workflows c
                     WHERE c.id IN (SELECT s.child_id FROM %1$I.workflow_steps s
                                     WHERE s.workflow_id = $1 AND s.child_id IS NOT NULL AND s.status IN (''pending'', ''ready'', ''running''))
                       AND c.status IN (''new'', ''running'')
                     ORDER BY c.id FOR UPDATE)
     UPDATE %1$I.workflows c SET status = ''cancelled'', cancelled_at = pg_catalog.now(), updated_at = pg_catalog.now()
       FROM live WHERE c.id = live.id AND c.status IN (''new'', ''running'')
     RETURNING c.id', TG_TABLE_SCHEMA)
    USING NEW.id LOOP
    PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
      'schema', TG_TABLE_SCHEMA, 'table', 'workflows', 'id', child, 'status', 'cancelled')::pg_catalog.text);
  END LOOP;
  EXECUTE pg_catalog.format(
    'UPDATE %I.workflow_steps SET status = ''cancelled'', updated_at = pg_catalog.now(),
            completed_at = greatest(pg_catalog.now(), coalesce(started_at, pg_catalog.now())), lease_until = NULL
      WHERE workflow_id = $1 AND status IN (''pending'', ''ready'', ''running'')', TG_TABLE_SCHEMA)
    USING NEW.id;
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  PERFORM pg_catalog.set_config('stepd.executor', previous, true);
  RAISE;
END;
$$;
