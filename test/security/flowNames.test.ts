/**
 * Look-alike flow names and who a flow says stored it (sql/0023, src/flow/flowName.ts). Flows
 * are started by name, so a service that registers "pаyments" (a Cyrillic "а") beside
 * "payments", or "payments" with a zero-width space or a right-to-left override, gets its flow
 * started by whoever picks the name that looks right. The database refuses such names from every
 * client (clients insert rows directly), `stepd flow put` and `stepd validate` refuse them
 * first; and `flows.created_by` names only the writing role unless the writer is trusted.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { flowNameProblem, INVISIBLE_RANGES, SCRIPT_RANGES } from '../../src/flow/flowName.js';
import { validateFlow } from '../../src/flow/validate.js';
import { envFor, runCli, writeJson } from '../cli/helpers.js';
import { onCleanup } from '../helpers/db.js';
import { createClientRole, createSecuredSchema, refused, type ClientRole } from './helpers.js';

const FLOW = { start: 'a', steps: { a: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } } };

/** Each look-alike of a registered name, and what the refusal says. */
const LOOK_ALIKES: [string, string, RegExp][] = [
  ['Cyrillic а in a Latin name', 'p\u0430yments', /must not mix letters of Latin and Cyrillic/],
  ['Greek omicron in a Latin name', 'rep\u03bfrts', /must not mix letters of Latin and Greek/],
  ['zero-width space', 'payments\u200b', /invisible, format or direction characters/],
  ['word joiner', 'pay\u2060ments', /invisible, format or direction characters/],
  ['right-to-left override', 'pay\u202estnem', /invisible, format or direction characters/],
  ['right-to-left isolate', '\u2067payments', /invisible, format or direction characters/],
  ['byte order mark', '\ufeffpayments', /invisible, format or direction characters/],
  ['Arabic letter mark', 'pay\u061cments', /invisible, format or direction characters/],
  ['fullwidth letters', '\uff50\uff41\uff59\uff4d\uff45\uff4e\uff54\uff53', /NFKC form.*"payments"/],
  ['Kelvin sign', '\u212aelvin', /NFKC form.*"Kelvin"/],
  ['ligature', '\ufb01les', /NFKC form.*"files"/],
];

async function putAs(role: ClientRole, name: string, createdBy: string | null = null): Promise<{ version: number; created_by: string; created_role: string }> {
  const [row] = await role.q(`INSERT INTO stepd.flows (name, flow, created_by) VALUES ($1, $2, $3) RETURNING version, created_by, created_role`, [
    name,
    JSON.stringify(FLOW),
    createdBy,
  ]);
  return row;
}

describe('look-alike flow names are refused', () => {
  it('by the database, for a client role inserting into flows, with the reason and the normalized form', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    expect((await putAs(client, 'payments')).version).toBe(1);
    for (const [what, name, why] of LOOK_ALIKES) {
      const err = await refused(putAs(client, name), why);
      expect(err.code, what).toBe('23514');
      expect(err.message, what).toMatch(/^stepd: flow name .* refused/);
    }
    expect(await t.q(`SELECT name FROM stepd.flows`)).toEqual([{ name: 'payments' }]);
    // Names of one script (any script), digits and punctuation stay welcome.
    for (const name of ['платежи', 'πληρωμές', 'レポート-2', 'billing.refund_v2', 'daily report']) expect((await putAs(client, name)).version, name).toBe(1);
  });

  it('by the TypeScript checks with the same rules as the database, range by range', async () => {
    const t = await createSecuredSchema();
    for (const [what, name] of LOOK_ALIKES) expect(flowNameProblem(name), what).toBeDefined();
    // Each range's ends, after a Latin letter: the database and flowName.ts agree on every one.
    const samples = [...SCRIPT_RANGES.flatMap((s) => s.ranges), ...INVISIBLE_RANGES].flatMap(([lo, hi]) => [lo, hi]).filter((cp) => cp > 0 && (cp < 0xd800 || cp > 0xdfff));
    const names = samples.map((cp) => `a${String.fromCodePoint(cp)}`);
    const sql = await t.q<{ problem: string | null }>(`SELECT stepd.stepd_flow_name_problem(n) AS problem FROM unnest($1::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i`, [names]);
    const disagree = names.filter((n, i) => (sql[i]!.problem === null) !== (flowNameProblem(n) === undefined));
    expect(disagree.map((n) => `U+${n.codePointAt(1)!.toString(16)}`)).toEqual([]);
  });

  it('by stepd flow put as the client role, before anything is stored; and stepd validate refuses a sub-workflow step naming one', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const file = await writeJson(FLOW, 'flow.json');
    const env = { ...envFor(t), DATABASE_URL: client.url };
    for (const [name, why] of [
      ['p\u0430yments', /must not mix letters of Latin and Cyrillic/],
      ['payments\u200b', /invisible, format or direction characters \(it has U\+200B\)/],
      ['\u212aelvin', /NFKC form \(it has U\+212A\); use "Kelvin" instead/],
    ] as const) {
      const res = await runCli(['flow', 'put', file, '--name', name], { env });
      expect(res.code, res.stderr).toBe(1);
      expect(res.stderr).toMatch(why);
      expect(res.stderr).toMatch(/nothing was stored/);
    }
    expect(await t.q(`SELECT name FROM stepd.flows`)).toEqual([]);
    const ok = await runCli(['flow', 'put', file, '--name', 'payments', '--json'], { env });
    expect(ok.code, ok.stderr).toBe(0);

    const caller = { start: 'call', steps: { call: { workflow: { name: 'pay\u202ements' }, done: true } } };
    expect(validateFlow(caller).map((i) => i.message).join('\n')).toMatch(/invisible, format or direction characters/);
    const res = await runCli(['validate', await writeJson(caller, 'caller.json')], { env });
    expect(res.code).toBe(1);
    expect(res.stdout + res.stderr).toMatch(/U\+202E/);
  });
});

describe('created_by of a flow names the role that stored it', () => {
  it('a client role cannot record another identity; left out or its own name, it is the role', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const err = await refused(putAs(client, 'pay', 'alice'), /may not record "alice" as the author of flow "pay"/);
    expect(err.code).toBe('42501');
    // Not with the executor marker either.
    await client.session(async (q) => {
      await q(`SET stepd.executor = 'on'`);
      await refused(q(`INSERT INTO stepd.flows (name, flow, created_by) VALUES ('pay', $1, 'postgres')`, [JSON.stringify(FLOW)]), /may not record "postgres"/);
    });
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.flows`)).toEqual([{ n: 0 }]);
    expect(await putAs(client, 'pay')).toEqual({ version: 1, created_by: client.role, created_role: client.role });
    expect(await putAs(client, 'pay', client.role)).toEqual({ version: 2, created_by: client.role, created_role: client.role });

    // stepd flow put --by: refused for the client role, kept for a trusted one (here the superuser).
    const file = await writeJson(FLOW, 'pay.json');
    const forged = await runCli(['flow', 'put', file, '--name', 'forged', '--by', 'alice'], { env: { ...envFor(t), DATABASE_URL: client.url } });
    expect(forged.code).not.toBe(0);
    expect(forged.stderr).toMatch(/may not record "alice" as the author/);
    const trusted = await runCli(['flow', 'put', file, '--name', 'ops', '--by', 'ops-bot', '--json'], { env: envFor(t) });
    expect(trusted.code, trusted.stderr).toBe(0);
    expect(await t.q(`SELECT created_by, created_role FROM stepd.flows WHERE name = 'ops'`)).toEqual([{ created_by: 'ops-bot', created_role: 'postgres' }]);
  });

  it('a role with no grants at all stores nothing', async () => {
    const t = await createSecuredSchema();
    const name = `nogrant_${randomBytes(4).toString('hex')}`;
    await t.db.query(`CREATE ROLE ${pg.escapeIdentifier(name)} LOGIN`);
    const url = new URL(t.url);
    url.username = name;
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
    onCleanup(async () => {
      await pool.end().catch(() => {});
      await t.db.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(name)}`);
    });
    await refused(pool.query(`INSERT INTO ${t.schema}.flows (name, flow, created_by) VALUES ('payments', '{}', 'alice')`), /permission denied/);
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.flows`)).toEqual([{ n: 0 }]);
  });
});
