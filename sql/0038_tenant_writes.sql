-- stepd schema, part 38: a client changes only its own tenant's work (DESIGN.md §7, "Tenants
-- are isolated"; docs/security.md, "Whose work a client may change").
--
--   client_act_as   the config's `clients.ROLE.actAs` patterns, written by the executor when it
--                   starts (as size_caps and priority_caps are: the last executor to start wins;
--                   executors share one config). Clients hold no grant on it.
--   acting for      stepd_role_acts_for(role, created_role, created_by): whether a role may act
--                   for a workflow's tenant. True for a trusted role (superusers, executor and
--                   owner members); a member of the workflow's created_role (the role itself,
--                   or one it was GRANTed); a role that may act as the workflow's user
--                   (created_by: the role's own name, or a user its actAs patterns cover, `*`
--                   matching any run of characters, as src/security/actAs.ts does).
--   cancel          `UPDATE workflows SET status = 'cancelled'` from outside the executor is
--                   refused (42501, naming the rule) unless the session's role acts for the
--                   workflow. A sub-workflow child carries its parent's created_role and
--                   created_by, so the parent's tenant may still cancel it directly. The cancel
--                   cascades (definer functions, marked as the executor) are unaffected.
--   ready a step    readying a pending step from outside the executor (approving or rejecting a
--                   gate) is refused (42501) unless the role acts for the workflow, or the gate
--                   names approvers (its row's args.approvers, written by the executor): then
--                   the executor judges the approver and the role's actAs at the claim
--                   (src/executor/steps/gateReadying.ts), as before. Signals stay broadcast
--                   (DESIGN.md §2c): a wait is readied by the signals trigger, never by a client.
--   unchanged       redrive (part 17) and delete (part 20) stay with the creating role, its
--                   members and trusted roles; edits of a new workflow too (part 20).
--
-- Both guard functions are SECURITY DEFINER (they read client_act_as, which clients cannot),
-- pin search_path = pg_catalog, pg_temp and qualify every name; PUBLIC may not call them.

CREATE TABLE client_act_as (
  role        text PRIMARY KEY,
  patterns    text[] NOT NULL,
  written_by  text,
  written_at  timestamptz NOT NULL DEFAULT now()
);

DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_role_acts_for(role_name pg_catalog.text, owner_role pg_catalog.text, acting_user pg_catalog.text)
    RETURNS pg_catalog.bool
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
      SELECT coalesce(@schema@.stepd_role_is_trusted(role_name), false)
          OR coalesce(pg_catalog.pg_has_role(pg_catalog.to_regrole(pg_catalog.quote_ident(role_name))::pg_catalog.oid,
                                             pg_catalog.to_regrole(pg_catalog.quote_ident(owner_role))::pg_catalog.oid, 'MEMBER'), false)
          OR (acting_user IS NOT NULL
              AND (acting_user OPERATOR(pg_catalog.=) role_name
                   OR EXISTS (SELECT 1 FROM @schema@.client_act_as a, pg_catalog.unnest(a.patterns) AS p(pattern)
                               WHERE a.role OPERATOR(pg_catalog.=) role_name
                                 AND acting_user OPERATOR(pg_catalog.~~) pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                                       p.pattern, E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_'), '*', '%'))))
    $body$ $f$, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_role_acts_for(pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;

-- Cancel: the tenant's decision.
CREATE FUNCTION stepd_guard_cancel_owner() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  allowed pg_catalog.bool;
BEGIN
  EXECUTE pg_catalog.format('SELECT %I.stepd_role_acts_for($1, $2, $3)', TG_TABLE_SCHEMA)
    INTO allowed USING session_user::pg_catalog.text, OLD.created_role, OLD.created_by;
  IF coalesce(allowed, false) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'stepd: workflow % was started by role % for user %; role % may cancel only the workflows of its own role or of users it may act as', OLD.id, coalesce(OLD.created_role, '(the executor)'), coalesce(OLD.created_by, '(none)'), session_user
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'Ask the role that started it (or an operator) to cancel it; a role granted that role, or whose clients.actAs covers the workflow''s user, may too.';
END;
$$;

CREATE TRIGGER workflows_guard_cancel_owner
  BEFORE UPDATE OF status ON workflows
  FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status IS DISTINCT FROM 'cancelled' AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_guard_cancel_owner();

-- Readying a pending step: the tenant's, or an approver's when the gate names approvers.
CREATE FUNCTION stepd_guard_ready_owner() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner_role pg_catalog.text;
  acting_user pg_catalog.text;
  allowed pg_catalog.bool;
BEGIN
  -- The executor judges approvers against the readying role's actAs (gateReadying.ts).
  IF OLD.tool IS NULL AND pg_catalog.jsonb_typeof(OLD.args OPERATOR(pg_catalog.->) 'approvers') OPERATOR(pg_catalog.=) 'array' THEN
    RETURN NEW;
  END IF;
  EXECUTE pg_catalog.format('SELECT w.created_role, w.created_by FROM %I.workflows w WHERE w.id = $1', TG_TABLE_SCHEMA)
    INTO owner_role, acting_user USING OLD.workflow_id;
  EXECUTE pg_catalog.format('SELECT %I.stepd_role_acts_for($1, $2, $3)', TG_TABLE_SCHEMA)
    INTO allowed USING session_user::pg_catalog.text, owner_role, acting_user;
  IF coalesce(allowed, false) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'stepd: step % belongs to workflow % started by role % for user %; role % may ready only the steps of its own role''s workflows or of users it may act as', OLD.id, OLD.workflow_id, coalesce(owner_role, '(the executor)'), coalesce(acting_user, '(none)'), session_user
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'A gate that other services approve names them: "approval": {"approvers": [...]}; or send a signal the workflow waits for.';
END;
$$;

-- Named to fire after the specific guards (signal waits, worker tasks), whose errors say more.
CREATE TRIGGER workflow_steps_ready_owner
  BEFORE UPDATE OF status ON workflow_steps
  FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status = 'ready' AND NOT stepd_is_executor())
  EXECUTE FUNCTION stepd_guard_ready_owner();

REVOKE ALL ON FUNCTION stepd_guard_cancel_owner(), stepd_guard_ready_owner() FROM PUBLIC;
