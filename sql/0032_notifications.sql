-- stepd schema, part 32: notifications (docs/operations.md, "Notifications").
--
--   notification_outbox   one row per event worth a webhook, written by triggers in the very
--                   transaction that makes it true, so none is lost and none is told before it
--                   commits: a pending step row without a tool inserted (a gate waiting, or a
--                   candidate: the daemon reads the flow to tell gates from other waits) and a
--                   workflow becoming failed. The daemon's notifier moves rows into its pg-boss
--                   queue (deleting them in the same transaction) and pg-boss delivers, with
--                   retries. The trigger function is SECURITY DEFINER (whoever's write fires it,
--                   the row is written), path pinned, PUBLIC revoked. Clients hold no grant on
--                   the table.
--   approval_links  the single-use approve and reject links of a gate's notification: the
--                   SHA-256 of each link's 256-bit random token (never the token), the step,
--                   the action, the user it acts as, its expiry, and when it was used. A partial
--                   unique index lets at most one link of a step ever be used, whatever races:
--                   using one burns its siblings. Clients hold no grant on it.

CREATE TABLE notification_outbox (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind         text NOT NULL,
  workflow_id  bigint NOT NULL,
  step_id      bigint,
  created_at   timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT notification_outbox_kind CHECK (kind IN ('step.waiting', 'workflow.failed'))
);

CREATE TABLE approval_links (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  step_id       bigint NOT NULL,
  workflow_id   bigint NOT NULL,
  action        text NOT NULL,
  act_as        text NOT NULL,
  token_sha256  bytea NOT NULL,
  expires_at    timestamptz NOT NULL,
  used_at       timestamptz,
  used          boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT approval_links_action CHECK (action IN ('approve', 'reject')),
  CONSTRAINT approval_links_token_length CHECK (octet_length(token_sha256) = 32),
  CONSTRAINT approval_links_used_has_used_at CHECK (NOT used OR used_at IS NOT NULL)
);
CREATE UNIQUE INDEX approval_links_token_idx ON approval_links (token_sha256);
CREATE INDEX approval_links_step_idx ON approval_links (step_id);
-- Single use, in the database: one used link per step, ever.
CREATE UNIQUE INDEX approval_links_one_use_idx ON approval_links (step_id) WHERE used;
CREATE INDEX approval_links_expiry_idx ON approval_links (expires_at);

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_notify_outbox() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      IF TG_TABLE_NAME = 'workflow_steps' THEN
        INSERT INTO @schema@.notification_outbox (kind, workflow_id, step_id) VALUES ('step.waiting', NEW.workflow_id, NEW.id);
      ELSE
        INSERT INTO @schema@.notification_outbox (kind, workflow_id) VALUES ('workflow.failed', NEW.id);
      END IF;
      RETURN NULL;
    END;
    $body$ $f$, '@schema@', s);
  EXECUTE pg_catalog.replace('REVOKE ALL ON FUNCTION @schema@.stepd_notify_outbox() FROM PUBLIC', '@schema@', s);
END;
$migration$;

CREATE TRIGGER workflow_steps_notify_waiting
  AFTER INSERT ON workflow_steps
  FOR EACH ROW WHEN (NEW.status = 'pending' AND NEW.tool IS NULL)
  EXECUTE FUNCTION stepd_notify_outbox();

CREATE TRIGGER workflows_notify_failed
  AFTER UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.status = 'failed' AND OLD.status IS DISTINCT FROM 'failed')
  EXECUTE FUNCTION stepd_notify_outbox();
