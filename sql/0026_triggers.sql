-- stepd schema, part 26: starting workflows from signals (docs/signals.md, docs/security.md).
--
--   triggers     "each signal named `signal` starts one workflow of `flow`": name (as schedule
--                names), signal, flow (a registered flow, started by name: its latest version,
--                pinned at admission), input (a template, default "{{signal.payload}}"), run_as
--                (the user the workflow runs as, optional), and, stamped here whatever the
--                writer sends: created_role (session_user of the last write: the role that
--                answers for what the trigger starts), owner_role (the role that added it;
--                only it, a member of it or a trusted role may change or remove it, as for
--                schedules in part 15), created_at, updated_at. Clients insert and update some
--                columns and remove their triggers through remove_trigger(name) (no table-level
--                UPDATE or DELETE: those would let them LOCK TABLE).
--   the start    an AFTER INSERT trigger on signals (SECURITY DEFINER, pinned) inserts, in the
--                signal's own transaction, one workflow per matching trigger with the key
--                'signal:TRIGGER:<signal id>' (ON CONFLICT DO NOTHING): a committed signal has
--                started exactly one workflow per trigger, a rolled-back one none, whatever the
--                executors do. Triggers added later do not start workflows for older signals.
--   acting user  the workflow's created_role is the trigger's created_role and its created_by
--                is run_as, else the signal's writing role: admission (clients.actAs) admits it
--                only when the trigger's writer may act as that user. So a trigger runs a flow
--                as the signal's writer only when its own writer could have started it as that
--                writer, and as run_as only when its writer may act as run_as; otherwise the
--                workflow fails with permission_denied before any step runs.
--   templates    resolved here, in SQL: a string that is exactly one template keeps the value's
--                type; templates inside text interpolate (strings as they are, the rest as JSON).
--                Known: {{signal.id}} (text), {{signal.name}}, {{signal.key}}, {{signal.at}}
--                (ISO 8601, UTC), {{signal.role}}, {{signal.payload}} and paths into it
--                ({{signal.payload.order.id}}, {{signal.payload.items[0]}}). Checked when the
--                trigger is written (at most 32 templates, 64 KiB); a path the signal's payload
--                lacks, or an input that is not a JSON object, fails that workflow at once with
--                invalid_input: the sender's transaction never fails because of a trigger.
--   keys         idempotency keys starting with 'signal:' are this path's; clients may not use
--                them (as 'schedule:' in part 15).

CREATE TABLE triggers (
  name          text PRIMARY KEY,
  signal        text NOT NULL,
  flow          text NOT NULL,
  input         jsonb NOT NULL DEFAULT '"{{signal.payload}}"'::jsonb,
  run_as        text,
  created_role  text,
  owner_role    text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- The name is part of each workflow's idempotency key.
  CONSTRAINT triggers_name_valid CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$'),
  CONSTRAINT triggers_signal_valid CHECK (octet_length(signal) BETWEEN 1 AND 200 AND signal !~ '[\u0001-\u001F\u007F-\u009F]'),
  CONSTRAINT triggers_flow_valid CHECK (length(flow) BETWEEN 1 AND 200),
  CONSTRAINT triggers_run_as_valid CHECK (run_as IS NULL OR (length(run_as) BETWEEN 1 AND 200 AND run_as !~ '[\u0001-\u001F\u007F-\u009F]')),
  CONSTRAINT triggers_input_at_most_64_kib CHECK (pg_column_size(input) <= 65536)
);

CREATE INDEX triggers_signal_idx ON triggers (signal);


-- The functions name their schema where the bodies say @schema@ (baked in here, as in part 20).
DO $migration$
DECLARE
  s pg_catalog.text := pg_catalog.quote_ident(pg_catalog.current_schema());
BEGIN
  -- The path of a template expression into {id, name, key, at, role, payload}; NULL when the
  -- expression is not one this part knows.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_signal_template_path(expr pg_catalog.text) RETURNS pg_catalog.text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $body$
      SELECT CASE WHEN x.e ~ '^signal\.(id|name|key|at|role|payload(\.[^.\[\]{}[:space:]]+|\[[0-9]+\])*)$'
                  THEN pg_catalog.string_to_array(pg_catalog.regexp_replace(pg_catalog.substr(x.e, 8), '\[([0-9]+)\]', '.\1', 'g'), '.')
             END
        FROM (SELECT pg_catalog.btrim($1, E' \t\n\r') AS e) AS x
    $body$ $f$, '@schema@', s);

  -- Every template of an input template (the text between the braces), in strings at any depth.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_trigger_template_refs(template pg_catalog.jsonb) RETURNS SETOF pg_catalog.text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $body$
      SELECT m[1]
        FROM pg_catalog.jsonb_path_query($1, 'strict $.** ? (@.type() == "string")') AS v(j),
             pg_catalog.regexp_matches(v.j #>> '{}', '\{\{([^{}]*)\}\}', 'g') AS m
    $body$ $f$, '@schema@', s);

  -- What is wrong with an input template (checked when a trigger is written), or NULL.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_trigger_template_problem(template pg_catalog.jsonb) RETURNS pg_catalog.text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      n pg_catalog.int8;
      bad pg_catalog.text;
    BEGIN
      IF NOT (pg_catalog.jsonb_typeof(template) = 'object'
              OR (pg_catalog.jsonb_typeof(template) = 'string' AND (template #>> '{}') ~ '^\{\{[^{}]*\}\}$')) THEN
        RETURN pg_catalog.format('the input template must be a JSON object, or a string that is exactly one template such as "{{signal.payload}}" (got %s)',
                                 pg_catalog.left(template::pg_catalog.text, 200));
      END IF;
      SELECT pg_catalog.count(*) INTO n FROM @schema@.stepd_trigger_template_refs(template);
      IF n > 32 THEN
        RETURN pg_catalog.format('the input template has %s templates; at most 32 are allowed', n);
      END IF;
      SELECT r INTO bad FROM @schema@.stepd_trigger_template_refs(template) AS r WHERE @schema@.stepd_signal_template_path(r) IS NULL LIMIT 1;
      IF bad IS NOT NULL THEN
        RETURN pg_catalog.format('template {{%s}} is not known: use signal.id, signal.name, signal.key, signal.at, signal.role, signal.payload or a path into the payload (signal.payload.order.id, signal.payload.items[0])',
                                 pg_catalog.left(bad, 200));
      END IF;
      RETURN NULL;
    END;
    $body$ $f$, '@schema@', s);

  -- The first template the signal has no value for (a path its payload lacks), or NULL.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_trigger_template_missing(template pg_catalog.jsonb, sig pg_catalog.jsonb) RETURNS pg_catalog.text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $body$
      SELECT r FROM @schema@.stepd_trigger_template_refs($1) AS r
       WHERE ($2 #> @schema@.stepd_signal_template_path(r)) IS NULL LIMIT 1
    $body$ $f$, '@schema@', s);

  -- The template with every template replaced by the signal's value (a string that is exactly one
  -- template keeps the value's type; inside text, strings as they are and the rest as JSON).
  -- Every template must have a value (stepd_trigger_template_missing is NULL).
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_resolve_trigger_template(template pg_catalog.jsonb, sig pg_catalog.jsonb) RETURNS pg_catalog.jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      t pg_catalog.text;
      m pg_catalog.text[];
      v pg_catalog.jsonb;
      out pg_catalog.text := '';
      result pg_catalog.jsonb;
    BEGIN
      CASE pg_catalog.jsonb_typeof(template)
        WHEN 'object' THEN
          SELECT coalesce(pg_catalog.jsonb_object_agg(e.key, @schema@.stepd_resolve_trigger_template(e.value, sig)), '{}'::pg_catalog.jsonb)
            INTO result FROM pg_catalog.jsonb_each(template) AS e;
          RETURN result;
        WHEN 'array' THEN
          SELECT coalesce(pg_catalog.jsonb_agg(@schema@.stepd_resolve_trigger_template(e.value, sig) ORDER BY e.n), '[]'::pg_catalog.jsonb)
            INTO result FROM pg_catalog.jsonb_array_elements(template) WITH ORDINALITY AS e(value, n);
          RETURN result;
        WHEN 'string' THEN
          t := template #>> '{}';
          IF pg_catalog.strpos(t, '{{') = 0 THEN
            RETURN template;
          END IF;
          m := pg_catalog.regexp_match(t, '^\{\{([^{}]*)\}\}$');
          IF m IS NOT NULL THEN
            RETURN sig #> @schema@.stepd_signal_template_path(m[1]);
          END IF;
          LOOP
            m := pg_catalog.regexp_match(t, '^(.*?)\{\{([^{}]*)\}\}(.*)$', 's');
            EXIT WHEN m IS NULL;
            v := sig #> @schema@.stepd_signal_template_path(m[2]);
            out := out || m[1] || CASE pg_catalog.jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' ELSE v::pg_catalog.text END;
            t := m[3];
          END LOOP;
          RETURN pg_catalog.to_jsonb(out || t);
        ELSE
          RETURN template;
      END CASE;
    END;
    $body$ $f$, '@schema@', s);

  -- Writes of triggers: the owner rules of schedules (part 15), the stamps, the checks.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_triggers_write() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      problem pg_catalog.text;
    BEGIN
      IF TG_OP = 'INSERT' THEN
        NEW.owner_role := session_user;
        NEW.created_at := pg_catalog.now();
      ELSE
        IF NOT coalesce(@schema@.stepd_role_is_trusted(session_user::pg_catalog.text), false)
           AND NOT coalesce(pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(OLD.owner_role))::pg_catalog.oid, 'MEMBER'), false) THEN
          RAISE EXCEPTION 'stepd: trigger % belongs to role %; role % may not % it', OLD.name, coalesce(OLD.owner_role, '(unknown)'), session_user,
            CASE TG_OP WHEN 'DELETE' THEN 'remove' ELSE 'change' END
            USING ERRCODE = 'insufficient_privilege', HINT = 'Add a trigger under a name of your own.';
        END IF;
        IF TG_OP = 'DELETE' THEN
          RETURN OLD;
        END IF;
        NEW.owner_role := OLD.owner_role;
        NEW.created_at := OLD.created_at;
      END IF;
      NEW.created_role := session_user;
      NEW.updated_at := pg_catalog.now();
      IF NOT EXISTS (SELECT 1 FROM @schema@.flows f WHERE f.name = NEW.flow) THEN
        RAISE EXCEPTION 'stepd: trigger % names flow "%", which is not registered', NEW.name, NEW.flow
          USING ERRCODE = 'check_violation', HINT = 'Register it first: stepd flow put FILE --name NAME';
      END IF;
      problem := @schema@.stepd_trigger_template_problem(NEW.input);
      IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'stepd: trigger %: %', NEW.name, problem USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END;
    $body$ $f$, '@schema@', s);

  -- A signal was inserted: one workflow per matching trigger, in the same transaction. The
  -- executor marker makes the guards (which would stamp the signal writer as created_role and
  -- refuse the 'signal:' key) stand aside for these rows; it is transaction-local, and an error
  -- here aborts the statement (a savepoint's rollback takes the setting back with it).
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_start_triggered_workflows() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      previous pg_catalog.text;
      r record;
      sig pg_catalog.jsonb;
      problem pg_catalog.text;
      resolved pg_catalog.jsonb;
      inserted pg_catalog.int8;
      first_new pg_catalog.int8;
    BEGIN
      -- Most signals match no trigger: one indexed look.
      IF NOT EXISTS (SELECT 1 FROM new_signals AS n JOIN @schema@.triggers AS g ON g.signal = n.name) THEN
        RETURN NULL;
      END IF;
      previous := coalesce(pg_catalog.current_setting('stepd.executor', true), '');
      PERFORM pg_catalog.set_config('stepd.executor', 'on', true);
      FOR r IN SELECT n.id, n.name, n.key, n.payload, n.created_at, n.created_role AS signal_role,
                      g.name AS trigger_name, g.flow, g.input AS template, g.run_as, g.created_role AS trigger_role
                 FROM new_signals AS n JOIN @schema@.triggers AS g ON g.signal = n.name
                ORDER BY n.id, g.name LOOP
        sig := pg_catalog.jsonb_build_object(
          'id', r.id::pg_catalog.text, 'name', r.name, 'key', r.key, 'payload', r.payload,
          'at', pg_catalog.to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'role', r.signal_role);
        problem := NULL;
        resolved := NULL;
        IF @schema@.stepd_trigger_template_missing(r.template, sig) IS NOT NULL THEN
          problem := pg_catalog.format('trigger %s: template {{%s}} has no value in signal %s (%s)', r.trigger_name,
                                       pg_catalog.btrim(@schema@.stepd_trigger_template_missing(r.template, sig)), r.id, r.name);
        ELSE
          resolved := @schema@.stepd_resolve_trigger_template(r.template, sig);
          IF pg_catalog.jsonb_typeof(resolved) IS DISTINCT FROM 'object' THEN
            problem := pg_catalog.format('trigger %s: its input template gave %s for signal %s, not a JSON object', r.trigger_name,
                                         coalesce(pg_catalog.jsonb_typeof(resolved), 'nothing'), r.id);
          END IF;
        END IF;
        inserted := NULL;
        IF problem IS NULL THEN
          INSERT INTO @schema@.workflows (name, flow, input, created_by, created_role, key)
          VALUES (r.flow, NULL, resolved, coalesce(r.run_as, r.signal_role), r.trigger_role, 'signal:' || r.trigger_name || ':' || r.id::pg_catalog.text)
          ON CONFLICT (key) DO NOTHING
          RETURNING id INTO inserted;
          first_new := coalesce(first_new, inserted);
        ELSE
          -- Refused as admission refuses an input: failed at once, never the sender's transaction.
          INSERT INTO @schema@.workflows (name, flow, input, created_by, created_role, key, status, error, started_at, completed_at)
          VALUES (r.flow, NULL, '{}'::pg_catalog.jsonb, coalesce(r.run_as, r.signal_role), r.trigger_role,
                  'signal:' || r.trigger_name || ':' || r.id::pg_catalog.text, 'failed',
                  pg_catalog.jsonb_build_object('code', 'invalid_input', 'message', problem,
                    'details', pg_catalog.jsonb_build_object('trigger', r.trigger_name, 'signal', r.id::pg_catalog.text)),
                  pg_catalog.now(), pg_catalog.now())
          ON CONFLICT (key) DO NOTHING;
        END IF;
      END LOOP;
      PERFORM pg_catalog.set_config('stepd.executor', previous, true);
      -- The executor marker kept the insert trigger quiet: wake the executors (a hint) once.
      IF first_new IS NOT NULL THEN
        PERFORM pg_catalog.pg_notify('stepd_wakeup', pg_catalog.json_build_object(
          'schema', TG_TABLE_SCHEMA, 'table', 'workflows', 'id', first_new, 'status', 'new')::pg_catalog.text);
      END IF;
      RETURN NULL;
    END;
    $body$ $f$, '@schema@', s);

  -- triggers_write (above) refuses another role's trigger: it judges session_user.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.remove_trigger(name pg_catalog.text) RETURNS SETOF @schema@.triggers
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
      DELETE FROM @schema@.triggers g WHERE g.name = $1 RETURNING g.*
    $body$ $f$, '@schema@', s);

  -- The keys of triggered workflows are this path's.
  EXECUTE pg_catalog.replace($f$
    CREATE FUNCTION @schema@.stepd_guard_signal_keys() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      IF NEW.key LIKE 'signal:%' AND (TG_OP = 'INSERT' OR NEW.key IS DISTINCT FROM OLD.key) THEN
        RAISE EXCEPTION 'stepd: idempotency keys starting with ''signal:'' are the signal triggers'' (got %)', NEW.key
          USING ERRCODE = 'check_violation', HINT = 'Prefix your keys with your service''s name.';
      END IF;
      RETURN NEW;
    END;
    $body$ $f$, '@schema@', s);

  EXECUTE pg_catalog.replace($f$
    CREATE TRIGGER triggers_write
      BEFORE INSERT OR UPDATE OR DELETE ON @schema@.triggers
      FOR EACH ROW EXECUTE FUNCTION @schema@.stepd_triggers_write()
  $f$, '@schema@', s);

  EXECUTE pg_catalog.replace($f$
    CREATE TRIGGER signals_start_triggered_workflows
      AFTER INSERT ON @schema@.signals
      REFERENCING NEW TABLE AS new_signals
      FOR EACH STATEMENT EXECUTE FUNCTION @schema@.stepd_start_triggered_workflows()
  $f$, '@schema@', s);

  EXECUTE pg_catalog.replace($f$
    CREATE TRIGGER workflows_guard_signal_keys
      BEFORE INSERT OR UPDATE OF key ON @schema@.workflows
      FOR EACH ROW WHEN (NEW.key IS NOT NULL AND NOT @schema@.stepd_is_executor())
      EXECUTE FUNCTION @schema@.stepd_guard_signal_keys()
  $f$, '@schema@', s);

  EXECUTE pg_catalog.replace(
    'REVOKE ALL ON FUNCTION @schema@.stepd_start_triggered_workflows(), @schema@.remove_trigger(pg_catalog.text) FROM PUBLIC',
    '@schema@', s);
END;
$migration$;
