-- stepd schema, part 28: sharing capacity — priority, keyed concurrency, rate limits
-- (docs/limits-and-fairness.md).
--
--   priority         workflows.priority (0 or more, default 0), set by the client at insert and
--                    lowered by a trigger to the role's cap, priority_caps.max_priority (0 when
--                    the role has no row). The executor writes priority_caps from the config's
--                    clients.ROLE.maxPriority when it starts (as it writes size_caps, part 21).
--                    Trusted roles (superusers, executor members) keep what they write. Clients
--                    may insert the column, never update it: nobody raises a priority later.
--                    Steps copy their workflow's priority (workflow_steps.priority), so claims
--                    order by it without a join.
--   gated steps      a step under a concurrency key (its own or its flow's) or a rate limit is
--                    written `gated`; the hot claims leave gated rows to the capacity claim,
--                    which asks capacity_verdicts() which of its locked candidates may start.
--   keys             workflow_steps.concurrency_key/limit: at most `limit` running steps per key
--                    value. workflows.concurrency_key/limit: at most `limit` workflows holding the
--                    key (key_held, taken when its first gated step starts, given back when the
--                    workflow ends: only running workflows count).
--   rates            workflow_steps.rate_keys: the token buckets a step takes one token from, each
--                    written 'COUNT|PERIOD_MS|BURST|NAME' (COUNT per PERIOD_MS, BURST at a time);
--                    rate_buckets holds each bucket's tokens and when it was last taken from.
--   the hot path     the ready index is unchanged; the priority and gated indexes are partial
--                    and hold only rows that use the knobs, so a deployment that uses none
--                    pays one empty index probe per claim.

ALTER TABLE workflows
  ADD COLUMN priority integer NOT NULL DEFAULT 0,
  ADD COLUMN concurrency_key text,
  ADD COLUMN concurrency_limit integer,
  ADD COLUMN key_held boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT workflows_priority_not_negative CHECK (priority >= 0),
  ADD CONSTRAINT workflows_concurrency_limit_positive CHECK (concurrency_limit IS NULL OR concurrency_limit > 0);

ALTER TABLE workflow_steps
  ADD COLUMN priority integer NOT NULL DEFAULT 0,
  ADD COLUMN gated boolean NOT NULL DEFAULT false,
  ADD COLUMN concurrency_key text,
  ADD COLUMN concurrency_limit integer,
  ADD COLUMN rate_keys text[],
  ADD CONSTRAINT workflow_steps_concurrency_limit_positive CHECK (concurrency_limit IS NULL OR concurrency_limit > 0);

-- New workflows with a priority, admitted first (most urgent, then oldest).
CREATE INDEX workflows_new_priority_idx ON workflows (priority DESC, id) WHERE status = 'new' AND priority > 0;
-- Workflows holding their flow's key.
CREATE INDEX workflows_key_held_idx ON workflows (concurrency_key) WHERE status = 'running' AND key_held;
-- Ready steps with a priority (ungated), claimed before the others.
CREATE INDEX workflow_steps_ready_priority_idx ON workflow_steps (priority DESC, ready_at, id)
  WHERE status = 'ready' AND priority > 0 AND NOT gated;
-- Ready gated steps, in the order the capacity claim visits them.
CREATE INDEX workflow_steps_ready_gated_idx ON workflow_steps (priority DESC, ready_at, id) WHERE status = 'ready' AND gated;
-- Running steps per key.
CREATE INDEX workflow_steps_running_key_idx ON workflow_steps (concurrency_key)
  WHERE status = 'running' AND concurrency_key IS NOT NULL;

CREATE TABLE priority_caps (
  role          text PRIMARY KEY,
  max_priority  integer NOT NULL,
  written_by    text,
  written_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT priority_caps_not_negative CHECK (max_priority >= 0)
);

CREATE TABLE rate_buckets (
  name         text PRIMARY KEY,
  tokens       double precision NOT NULL,
  refilled_at  timestamptz NOT NULL
);

DO $migration$
BEGIN
  EXECUTE pg_catalog.replace($f$
    -- A client's priority, lowered to its role's cap. Runs as the inserting role.
    CREATE FUNCTION @schema@.stepd_cap_priority() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      cap pg_catalog.int4;
    BEGIN
      IF @schema@.stepd_role_is_trusted(session_user::pg_catalog.text) THEN
        RETURN NEW;
      END IF;
      SELECT c.max_priority INTO cap FROM @schema@.priority_caps c WHERE c.role = session_user::pg_catalog.text;
      NEW.priority := least(NEW.priority, coalesce(cap, 0));
      RETURN NEW;
    END;
    $body$;

    -- Which of the caller's locked ready candidates (in the order given) may start now, under
    -- their keys and rates, and why the others wait ('key', 'rate'; wait_ms: until the next
    -- token; blocked_by: the full key, or the rate key of the empty bucket). Takes what the
    -- admitted ones need (tokens, flow keys) in the caller's transaction, under the claim-limits row lock that every limited claim takes, so counts
    -- are exact across executors and workers. `at` is the instant tokens were counted: the
    -- caller's claim sets started_at to it.
    CREATE FUNCTION @schema@.capacity_verdicts(candidates pg_catalog.int8[], max_ok pg_catalog.int4)
      RETURNS TABLE (step_id pg_catalog.int8, verdict pg_catalog.text, wait_ms pg_catalog.int4, at pg_catalog.timestamptz, blocked_by pg_catalog.text)
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      t pg_catalog.timestamptz;
      c record;
      n pg_catalog.int8;
      step_taken pg_catalog.jsonb := '{}';
      held_now pg_catalog.jsonb := '{}';
      full_keys pg_catalog.jsonb := '{}';
      admitted pg_catalog.int4 := 0;
      r pg_catalog.text;
      cnt pg_catalog.numeric;
      period_ms pg_catalog.numeric;
      burst pg_catalog.numeric;
      win pg_catalog.numeric;
      blocked_buckets pg_catalog.jsonb := '{}';
      bname pg_catalog.text;
      b record;
      have pg_catalog.numeric;
      short pg_catalog.int4;
      fits pg_catalog.bool;
      buckets pg_catalog.jsonb;
    BEGIN
      INSERT INTO @schema@.executor_leases (name) VALUES ('claim-limits')
        ON CONFLICT (name) DO UPDATE SET updated_at = pg_catalog.now() WHERE false;
      t := pg_catalog.clock_timestamp();
      FOR c IN
        SELECT s.id, s.concurrency_key AS skey, s.concurrency_limit AS slimit, s.rate_keys,
               w.id AS wid, w.concurrency_key AS wkey, w.concurrency_limit AS wlimit, w.key_held
          FROM pg_catalog.unnest(candidates) WITH ORDINALITY AS u(id, ord)
          JOIN @schema@.workflow_steps s ON s.id = u.id AND s.status = 'ready'
          JOIN @schema@.workflows w ON w.id = s.workflow_id
         ORDER BY u.ord
      LOOP
        EXIT WHEN admitted >= max_ok;
        -- The flow's key: held already, or room among the workflows holding it.
        IF c.wkey IS NOT NULL AND NOT c.key_held AND NOT held_now ? c.wid::pg_catalog.text THEN
          SELECT pg_catalog.count(*) INTO n FROM @schema@.workflows h
           WHERE h.status = 'running' AND h.key_held AND h.concurrency_key = c.wkey;
          IF n >= c.wlimit THEN
            step_id := c.id; verdict := 'key'; wait_ms := NULL; at := t; blocked_by := c.wkey;
            RETURN NEXT;
            CONTINUE;
          END IF;
        END IF;
        -- The step's key: running steps under it, and those admitted by this call.
        IF c.skey IS NOT NULL THEN
          IF full_keys ? c.skey THEN
            n := c.slimit;
          ELSE
            SELECT pg_catalog.count(*) INTO n FROM @schema@.workflow_steps x
             WHERE x.status = 'running' AND x.concurrency_key = c.skey;
            n := n + coalesce((step_taken ->> c.skey)::pg_catalog.int8, 0);
          END IF;
          IF n >= c.slimit THEN
            full_keys := full_keys || pg_catalog.jsonb_build_object(c.skey, true);
            step_id := c.id; verdict := 'key'; wait_ms := NULL; at := t; blocked_by := c.skey;
            RETURN NEXT;
            CONTINUE;
          END IF;
        END IF;
        -- The rates: a token from every bucket, or none is taken. A bucket gets `burst` tokens in
        -- each window of period * burst / count, windows aligned on the epoch; tokens a window
        -- leaves unused are not carried over. So no aligned period starts more than `count` steps
        -- (when burst divides count), and a claim late within its window loses nothing.
        fits := true;
        short := 0;
        buckets := '{}';
        blocked_by := NULL;
        FOREACH r IN ARRAY coalesce(c.rate_keys, '{}'::pg_catalog.text[]) LOOP
          cnt := pg_catalog.split_part(r, '|', 1)::pg_catalog.numeric;
          period_ms := pg_catalog.split_part(r, '|', 2)::pg_catalog.numeric;
          burst := pg_catalog.split_part(r, '|', 3)::pg_catalog.numeric;
          bname := pg_catalog.substr(r, pg_catalog.length(pg_catalog.split_part(r, '|', 1)) + pg_catalog.length(pg_catalog.split_part(r, '|', 2))
                                        + pg_catalog.length(pg_catalog.split_part(r, '|', 3)) + 4);
          win := pg_catalog.floor(extract(epoch FROM t) * 1000 * cnt / (period_ms * burst));
          IF blocked_buckets ? bname THEN
            have := 0;
          ELSE
            INSERT INTO @schema@.rate_buckets AS rb (name, tokens, refilled_at) VALUES (bname, burst, t)
              ON CONFLICT (name) DO NOTHING;
            SELECT rb.tokens, rb.refilled_at INTO b FROM @schema@.rate_buckets rb WHERE rb.name = bname FOR UPDATE;
            have := CASE WHEN pg_catalog.floor(extract(epoch FROM b.refilled_at) * 1000 * cnt / (period_ms * burst)) < win THEN burst ELSE b.tokens END;
          END IF;
          IF have < 1 THEN
            fits := false;
            blocked_by := coalesce(blocked_by, r);
            blocked_buckets := blocked_buckets || pg_catalog.jsonb_build_object(bname, true);
            short := greatest(short, pg_catalog.ceil((win + 1) * period_ms * burst / cnt - extract(epoch FROM t) * 1000)::pg_catalog.int4);
          END IF;
          buckets := buckets || pg_catalog.jsonb_build_object(bname, have);
        END LOOP;
        IF NOT fits THEN
          step_id := c.id; verdict := 'rate'; wait_ms := greatest(short, 1); at := t;
          RETURN NEXT;
          CONTINUE;
        END IF;
        FOR bname IN SELECT pg_catalog.jsonb_object_keys(buckets) LOOP
          UPDATE @schema@.rate_buckets rb SET tokens = (buckets ->> bname)::pg_catalog.float8 - 1, refilled_at = t
           WHERE rb.name = bname;
        END LOOP;
        IF c.wkey IS NOT NULL AND NOT c.key_held AND NOT held_now ? c.wid::pg_catalog.text THEN
          UPDATE @schema@.workflows SET key_held = true WHERE id = c.wid;
          held_now := held_now || pg_catalog.jsonb_build_object(c.wid::pg_catalog.text, true);
        END IF;
        IF c.skey IS NOT NULL THEN
          step_taken := step_taken || pg_catalog.jsonb_build_object(c.skey, coalesce((step_taken ->> c.skey)::pg_catalog.int8, 0) + 1);
        END IF;
        admitted := admitted + 1;
        step_id := c.id; verdict := 'ok'; wait_ms := NULL; at := t; blocked_by := NULL;
        RETURN NEXT;
      END LOOP;
    END;
    $body$;

    -- Keys, holds, priorities and gates are the executor's: a role with more than the client's
    -- column grants (a DBA's over-grant) is refused them as the guards refuse other columns.
    CREATE FUNCTION @schema@.stepd_guard_capacity() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        RAISE EXCEPTION 'stepd: a new workflow may not set concurrency_key, concurrency_limit or key_held; the executor sets them from the flow''s "concurrency"'
          USING ERRCODE = 'check_violation';
      END IF;
      IF TG_TABLE_NAME = 'workflows' THEN
        RAISE EXCEPTION 'stepd: the priority and concurrency key of workflow % are set at insert and by the executor; they cannot be changed', OLD.id
          USING ERRCODE = 'check_violation', HINT = 'Start a new workflow with the priority you need (capped by clients.ROLE.maxPriority).';
      END IF;
      RAISE EXCEPTION 'stepd: the priority, keys and rates of step % are the executor''s; they cannot be changed', OLD.id
        USING ERRCODE = 'check_violation';
    END;
    $body$;

    CREATE TRIGGER workflows_guard_capacity_insert
      BEFORE INSERT ON @schema@.workflows
      FOR EACH ROW WHEN ((NEW.concurrency_key IS NOT NULL OR NEW.concurrency_limit IS NOT NULL OR NEW.key_held)
                         AND NOT @schema@.stepd_is_executor())
      EXECUTE FUNCTION @schema@.stepd_guard_capacity();

    CREATE TRIGGER workflows_guard_capacity
      BEFORE UPDATE ON @schema@.workflows
      FOR EACH ROW WHEN ((NEW.priority IS DISTINCT FROM OLD.priority OR NEW.concurrency_key IS DISTINCT FROM OLD.concurrency_key
                          OR NEW.concurrency_limit IS DISTINCT FROM OLD.concurrency_limit OR NEW.key_held IS DISTINCT FROM OLD.key_held)
                         AND NOT @schema@.stepd_is_executor())
      EXECUTE FUNCTION @schema@.stepd_guard_capacity();

    CREATE TRIGGER workflow_steps_guard_capacity
      BEFORE UPDATE ON @schema@.workflow_steps
      FOR EACH ROW WHEN ((NEW.priority IS DISTINCT FROM OLD.priority OR NEW.gated IS DISTINCT FROM OLD.gated
                          OR NEW.concurrency_key IS DISTINCT FROM OLD.concurrency_key OR NEW.concurrency_limit IS DISTINCT FROM OLD.concurrency_limit
                          OR NEW.rate_keys IS DISTINCT FROM OLD.rate_keys)
                         AND NOT @schema@.stepd_is_executor())
      EXECUTE FUNCTION @schema@.stepd_guard_capacity();

    CREATE TRIGGER workflows_cap_priority
      BEFORE INSERT ON @schema@.workflows
      FOR EACH ROW WHEN (NEW.priority > 0)
      EXECUTE FUNCTION @schema@.stepd_cap_priority();

    REVOKE ALL ON FUNCTION @schema@.stepd_cap_priority(), @schema@.stepd_guard_capacity(), @schema@.capacity_verdicts(pg_catalog.int8[], pg_catalog.int4) FROM PUBLIC;
  $f$, '@schema@', pg_catalog.quote_ident(pg_catalog.current_schema()));
END;
$migration$;
