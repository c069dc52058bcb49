-- stepd schema, part 23: flow names people can trust by eye, and who a flow says stored it
-- (docs/security.md, "Flow names and who stored a flow").
--
--   flows.name        every insert is checked like src/flow/flowName.ts checks it (same ranges):
--                     no invisible, format or direction characters (zero-width, joiners, bidi
--                     controls, U+FEFF, private use, separators but the ASCII space), NFKC form
--                     (a name NFKC would change is refused, not normalized: the stored name is
--                     always the one sent; the message gives the normalized form), and letters
--                     of at most one of the look-alike scripts (Latin, Greek, Cyrillic, Coptic,
--                     Armenian, Georgian, Cherokee, Hebrew, Arabic). SQLSTATE 23514. Names
--                     registered before are left as they are (stepd_flow_name_problem lists them).
--   flows.created_by  free text for trusted roles (superusers, executor members, the owner:
--                     `stepd flow put --by`); any other role may leave it NULL (it becomes the
--                     role's name, as before) or give its own role name, nothing else
--                     (SQLSTATE 42501). created_role (sql/0009) records the writing role anyway.
--
-- The triggers' names order them: flows_name_check fires before flows_number_versions (the
-- per-name lock and the ownership check of sql/0015), flows_written_by after it.

CREATE FUNCTION stepd_flow_name_problem(name text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  scripts text[] := ARRAY[]::text[];
BEGIN
  IF name ~ '[\u0001-\u001F\u007F-\u009F\u00A0\u00AD\u034F\u061C\u115F-\u1160\u1680\u17B4-\u17B5\u180B-\u180F\u2000-\u200F\u2028-\u202F\u205F-\u206F\u3000\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF0-\uFFFB\uE000-\uF8FF\U0001D173-\U0001D17A\U000E0000-\U000E0FFF\U000F0000-\U0010FFFF]' THEN
    RETURN 'a flow name must not contain invisible, format or direction characters: such names look like another flow''s';
  END IF;
  -- IS NFKC NORMALIZED needs a UTF8 database; in any other encoding names hold no such characters to fold.
  IF pg_catalog.getdatabaseencoding() = 'UTF8' THEN
    IF NOT (name IS NFKC NORMALIZED) THEN
      RETURN format('a flow name must be in Unicode NFKC form; use %s instead', pg_catalog.to_json(pg_catalog.normalize(name, 'NFKC'))::text);
    END IF;
  END IF;
  IF name ~ '[\u0041-\u005A\u0061-\u007A\u00AA\u00BA\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u024F\u0250-\u02AF\u1D00-\u1D25\u1E00-\u1EFF\u2C60-\u2C7F\uA720-\uA7FF\uAB30-\uAB6F\uFF21-\uFF3A\uFF41-\uFF5A]' THEN scripts := pg_catalog.array_append(scripts, 'Latin'::text); END IF;
  IF name ~ '[\u0370-\u03FF\u1D26-\u1D2A\u1F00-\u1FFF]' THEN scripts := pg_catalog.array_append(scripts, 'Greek'::text); END IF;
  IF name ~ '[\u0400-\u052F\u1C80-\u1C8F\u1D2B\u2DE0-\u2DFF\uA640-\uA69F]' THEN scripts := pg_catalog.array_append(scripts, 'Cyrillic'::text); END IF;
  IF name ~ '[\u2C80-\u2CFF]' THEN scripts := pg_catalog.array_append(scripts, 'Coptic'::text); END IF;
  IF name ~ '[\u0531-\u058F\uFB13-\uFB17]' THEN scripts := pg_catalog.array_append(scripts, 'Armenian'::text); END IF;
  IF name ~ '[\u10A0-\u10FF\u1C90-\u1CBF\u2D00-\u2D2F]' THEN scripts := pg_catalog.array_append(scripts, 'Georgian'::text); END IF;
  IF name ~ '[\u13A0-\u13FF\uAB70-\uABBF]' THEN scripts := pg_catalog.array_append(scripts, 'Cherokee'::text); END IF;
  IF name ~ '[\u0591-\u05FF\uFB1D-\uFB4F]' THEN scripts := pg_catalog.array_append(scripts, 'Hebrew'::text); END IF;
  IF name ~ '[\u0600-\u06FF\u0750-\u077F\u0870-\u08FF\uFB50-\uFDFF\uFE70-\uFEFE]' THEN scripts := pg_catalog.array_append(scripts, 'Arabic'::text); END IF;
  IF pg_catalog.cardinality(scripts) > 1 THEN
    RETURN format('a flow name must not mix letters of %s: such names look like another flow''s (e.g. a Cyrillic "а" in a Latin name)',
                  pg_catalog.array_to_string(scripts, ' and '));
  END IF;
  RETURN NULL;
END;
$$;

CREATE FUNCTION stepd_flows_name_check() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  problem text;
BEGIN
  EXECUTE format('SELECT %I.stepd_flow_name_problem($1)', TG_TABLE_SCHEMA) INTO problem USING NEW.name;
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'stepd: flow name % refused: %', pg_catalog.to_json(NEW.name)::text, problem
      USING ERRCODE = 'check_violation',
            HINT = 'Flow names are NFKC text of one script without invisible characters (docs/security.md).';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER flows_name_check
  BEFORE INSERT ON flows
  FOR EACH ROW EXECUTE FUNCTION stepd_flows_name_check();

CREATE FUNCTION stepd_flows_written_by() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  trusted boolean;
BEGIN
  IF NEW.created_by IS NULL OR NEW.created_by = session_user::text THEN
    NEW.created_by := session_user;
    RETURN NEW;
  END IF;
  EXECUTE format('SELECT %I.stepd_role_is_trusted($1)', TG_TABLE_SCHEMA) INTO trusted USING session_user::text;
  IF NOT coalesce(trusted, false) THEN
    RAISE EXCEPTION 'stepd: role % may not record % as the author of flow %; created_by of a flow is the writing role''s own name', session_user, pg_catalog.to_json(NEW.created_by)::text, pg_catalog.to_json(NEW.name)::text
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'Leave created_by out (it becomes your role''s name), or have a trusted role store the flow.';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER flows_written_by
  BEFORE INSERT ON flows
  FOR EACH ROW EXECUTE FUNCTION stepd_flows_written_by();

-- Names registered before this migration are left as they are; say which break the new rules.
DO $migration$
DECLARE
  bad text;
BEGIN
  SELECT pg_catalog.string_agg(DISTINCT pg_catalog.to_json(f.name)::text, ', ') INTO bad
    FROM flows f WHERE stepd_flow_name_problem(f.name) IS NOT NULL;
  IF bad IS NOT NULL THEN
    RAISE NOTICE 'stepd: registered flow names that new versions could no longer use (left as they are): %', bad;
  END IF;
END;
$migration$;
