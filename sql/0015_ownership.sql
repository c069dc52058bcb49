-- stepd schema, part 15: who may change what another role registered (docs/security.md).
--
-- A workflow started by name (flow NULL, or a sub-workflow step) runs the latest version of the
-- registered flow as its own created_by. If any client role could add a version of any name, one
-- service could make another service's by-name starts run tools of its choosing with the
-- victim's identity. So:
--
--   flows      a name belongs to the role that stored its first (oldest) version. Only that role,
--              a member of it, or a trusted role (stepd_role_is_trusted: executor members, the
--              owner, superusers) may add versions. Anyone may register a new name.
--   schedules  a schedule belongs to the role that first added it (owner_role, stamped here,
--              kept on every update). Only that role, a member of it, or a trusted role may
--              change or remove it. (created_role stays the last writer's: the role admission
--              answers for.)
--   workflows  idempotency keys starting with 'schedule:' are the scheduler's (one per tick,
--              'schedule:NAME:<tick time>'); a client taking one would suppress that tick. Only
--              the executor writes them.
--
-- Roles are compared as session_user, the same role the tables record (created_role).

-- Version numbering (as in part 9), after the ownership check, under the same per-name lock.
CREATE OR REPLACE FUNCTION stepd_flows_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner_role text;
  has_versions boolean;
  trusted boolean;
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('stepd.flows'), pg_catalog.hashtext(TG_TABLE_SCHEMA || '.' || NEW.name));
  EXECUTE format('SELECT true, created_role FROM %I.flows WHERE name = $1 ORDER BY version LIMIT 1', TG_TABLE_SCHEMA)
    INTO has_versions, owner_role USING NEW.name;
  IF has_versions THEN
    EXECUTE format('SELECT %I.stepd_role_is_trusted($1)', TG_TABLE_SCHEMA) INTO trusted USING session_user::text;
    IF NOT coalesce(trusted, false)
       AND NOT coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(owner_role))::oid, 'MEMBER'), false) THEN
      RAISE EXCEPTION 'stepd: flow "%" belongs to role %; role % may not add versions of it', NEW.name, coalesce(owner_role, '(unknown)'), session_user
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Register your flow under a name of your own, or ask the owner (or an operator) to store the version.';
    END IF;
  END IF;
  EXECUTE format('SELECT coalesce(max(version), 0) + 1 FROM %I.flows WHERE name = $1', TG_TABLE_SCHEMA)
    INTO NEW.version USING NEW.name;
  NEW.created_at := now();
  NEW.created_role := session_user;
  NEW.created_by := coalesce(NEW.created_by, session_user);
  RETURN NEW;
END;
$$;

-- Schedules: the owner, stamped on insert and kept.
ALTER TABLE schedules ADD COLUMN owner_role text;
UPDATE schedules SET owner_role = created_role WHERE owner_role IS NULL;

CREATE FUNCTION stepd_schedules_owner() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  trusted boolean;
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.owner_role := session_user;
    RETURN NEW;
  END IF;
  EXECUTE format('SELECT %I.stepd_role_is_trusted($1)', TG_TABLE_SCHEMA) INTO trusted USING session_user::text;
  IF NOT coalesce(trusted, false)
     AND NOT coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(OLD.owner_role))::oid, 'MEMBER'), false) THEN
    RAISE EXCEPTION 'stepd: schedule % belongs to role %; role % may not % it', OLD.name, coalesce(OLD.owner_role, '(unknown)'), session_user,
      CASE TG_OP WHEN 'DELETE' THEN 'remove' ELSE 'change' END
      USING ERRCODE = 'insufficient_privilege', HINT = 'Add a schedule under a name of your own.';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  NEW.owner_role := OLD.owner_role;
  RETURN NEW;
END;
$$;

CREATE TRIGGER schedules_owner
  BEFORE INSERT OR UPDATE OR DELETE ON schedules
  FOR EACH ROW EXECUTE FUNCTION stepd_schedules_owner();

-- The scheduler's idempotency keys.
CREATE FUNCTION stepd_guard_reserved_keys() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NEW.key LIKE 'schedule:%' AND (TG_OP = 'INSERT' OR NEW.key IS DISTINCT FROM OLD.key) THEN
    RAISE EXCEPTION 'stepd: idempotency keys starting with ''schedule:'' are the scheduler''s (got %)', NEW.key
      USING ERRCODE = 'check_violation', HINT = 'Prefix your keys with your service''s name.';
  END IF;
  RETURN NEW;
END;
$$;

DO $migration$
BEGIN
  EXECUTE format($f$CREATE TRIGGER workflows_guard_reserved_keys
    BEFORE INSERT OR UPDATE OF key ON %1$I.workflows
    FOR EACH ROW WHEN (NEW.key IS NOT NULL AND NOT %1$I.stepd_is_executor())
    EXECUTE FUNCTION %1$I.stepd_guard_reserved_keys()$f$, current_schema());
END;
$migration$;
