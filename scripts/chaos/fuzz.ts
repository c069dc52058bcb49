/**
 * Fuzzing through the SQL contract, as an ordinary client: a LOGIN role that is a member of
 * `<schema>_client` (when migration 0006 made it; otherwise one granted the tables) inserts
 * random valid flows (fast-check, scripts/chaos/fuzzFlows.ts), garbage flows and rows that once
 * poisoned claims, and meanwhile tries random illegal writes on live rows
 * (scripts/chaos/illegalWrites.ts). Two daemons run it all. Every valid workflow must complete
 * with its side effects, every other one must end (never stay new or running), every illegal
 * write must be refused, and the daemons must stay alive. `--seed` reproduces a run.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { buildFlow, effectsOf, garbageFlow, poisonFlows, segments, type FuzzFlow } from './fuzzFlows.js';
import { Scenario, sleep, type Suite } from './harness.js';
import { illegalWrite } from './illegalWrites.js';
import { measure, type Figures } from './measure.js';

const SIZES = {
  reduced: { valid: 60, garbage: 20, illegal: 150, seconds: 15 },
  full: { valid: 250, garbage: 80, illegal: 600, seconds: 45 },
} as const;

interface ClientRole {
  name: string;
  pool: pg.Pool;
  /** True when the role is a member of `<schema>_client` (migration 0006). */
  contractRole: boolean;
}

async function createClientRole(s: Scenario): Promise<ClientRole> {
  const name = `chaos_fuzz_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  const contract = `${s.schema}_client`;
  const [found] = await s.q<{ n: number }>(`SELECT count(*)::int AS n FROM pg_roles WHERE rolname = $1`, [contract]);
  const contractRole = found!.n > 0;
  // Names are generated here (hex), never input; CREATE ROLE takes no parameters.
  await s.q(`CREATE ROLE ${name} LOGIN PASSWORD '${password}'`);
  if (contractRole) {
    await s.q(`GRANT ${contract} TO ${name}`);
  } else {
    await s.q(`GRANT USAGE ON SCHEMA ${s.schema} TO ${name}`);
    await s.q(`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA ${s.schema} TO ${name}`);
    await s.q(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ${s.schema} TO ${name}`);
  }
  const pool = new pg.Pool({ connectionString: s.suite.cluster.urlAs(name, password), max: 3, application_name: 'stepd-chaos-fuzz' });
  pool.on('error', () => {});
  return { name, pool, contractRole };
}

interface IllegalTally {
  tried: number;
  refused: number;
  missed: number;
  accepted: string[];
}

async function tryIllegal(client: ClientRole, s: Scenario, count: number, seed: number, durationMs: number): Promise<IllegalTally> {
  const tally: IllegalTally = { tried: 0, refused: 0, missed: 0, accepted: [] };
  const writes = fc.sample(illegalWrite(s.schema, client.contractRole), { numRuns: count, seed });
  for (const make of writes) {
    const [target] = await s.q<{ step: string | null; workflow: string | null }>(
      `SELECT (SELECT id::text FROM ${s.t.steps} ORDER BY random() LIMIT 1) AS step,
              (SELECT id::text FROM ${s.t.workflows} WHERE name LIKE 'fuzz%' ORDER BY random() LIMIT 1) AS workflow`,
    );
    if (!target?.step || !target.workflow) {
      await sleep(50);
      continue;
    }
    const w = make({ step: target.step, workflow: target.workflow });
    tally.tried += 1;
    const conn = await client.pool.connect();
    try {
      await conn.query('BEGIN');
      let last: pg.QueryResult | undefined;
      for (const st of w.statements) last = await conn.query(st.text, st.values);
      await conn.query('COMMIT');
      if ((last?.rowCount ?? 1) > 0) tally.accepted.push(w.label);
      else tally.missed += 1;
    } catch {
      await conn.query('ROLLBACK').catch(() => {});
      tally.refused += 1;
    } finally {
      conn.release();
    }
    await sleep(durationMs / count);
  }
  return tally;
}

export async function runFuzz(suite: Suite): Promise<Figures> {
  const size = SIZES[suite.size];
  const startedAt = Date.now();
  const s = new Scenario(suite, 'fuzz', { concurrency: 6 });
  let client: ClientRole | undefined;
  try {
    await s.setup();
    client = await createClientRole(s);
    await Promise.all(['f1', 'f2'].map((id) => s.startDaemon(id)));
    const valid = fc.sample(segments, { numRuns: size.valid, seed: suite.seed }).map((segs) => buildFlow(segs, s.targets));
    const garbage = fc.sample(garbageFlow, { numRuns: size.garbage, seed: suite.seed + 1 });
    const byId = new Map<string, FuzzFlow>();
    let refusedAtInsert = 0;
    const insert = async (name: string, flow: string, input: string): Promise<string | undefined> => {
      try {
        const r = await client!.pool.query<{ id: string }>(
          `INSERT INTO ${s.t.workflows} (name, flow, input, created_by) VALUES ($1, $2::jsonb, $3::jsonb, current_user) RETURNING id::text`,
          [name, flow, input],
        );
        return r.rows[0]!.id;
      } catch {
        refusedAtInsert += 1;
        return undefined;
      }
    };
    const illegal = tryIllegal(client, s, size.illegal, suite.seed + 2, size.seconds * 1000);
    const poison = poisonFlows();
    for (const p of poison) await insert('poison', p.flow, '{}');
    for (let i = 0; i < Math.max(valid.length, garbage.length); i++) {
      const v = valid[i];
      if (v) {
        const id = await insert('fuzz', JSON.stringify(v.flow), JSON.stringify(v.input));
        if (id) byId.set(id, v);
        else suite.progress(`fuzz: a valid flow was refused at insert: ${JSON.stringify(v.flow).slice(0, 300)}`);
      }
      const g = garbage[i];
      if (g !== undefined) await insert('garbage', JSON.stringify(g), '{}');
      await sleep((size.seconds * 1000) / size.valid);
    }
    const tally = await illegal;
    const failures: string[] = [];
    if (!(await s.settle(120_000))) failures.push('workflows still new or running 120 s after the last insert');
    const [others] = await s.q<{ stuck: number; ended: number }>(
      `SELECT count(*) FILTER (WHERE status IN ('new', 'running'))::int AS stuck, count(*)::int AS ended
         FROM ${s.t.workflows} WHERE name IN ('garbage', 'poison')`,
    );
    if (others!.stuck > 0) failures.push(`${others!.stuck} garbage/poison workflow(s) never ended`);
    if (byId.size < valid.length) failures.push(`${valid.length - byId.size} valid flow(s) refused at insert`);
    if (tally.accepted.length > 0) failures.push(`illegal writes accepted: ${[...new Set(tally.accepted)].join('; ')}`);
    return await measure(s, {
      executors: 2,
      mustComplete: (w) => w.name === 'fuzz' && byId.has(w.id),
      expected: (w) => (byId.has(w.id) ? effectsOf(byId.get(w.id)!, w.id) : []),
      failures,
      startedAt,
      extra: [
        `role ${client.contractRole ? '<schema>_client' : 'table grants (no 0006 roles)'}`,
        `garbage+poison ended ${others!.ended - others!.stuck}/${others!.ended} (refused at insert ${refusedAtInsert})`,
        `illegal writes ${tally.tried}: refused ${tally.refused}, no row ${tally.missed}, accepted ${tally.accepted.length}`,
      ],
    });
  } finally {
    await client?.pool.end().catch(() => {});
    await s.teardown();
  }
}
