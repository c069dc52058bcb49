/**
 * The signals table (sql/0024) as the SQL contract hands it to services. As a real LOGIN role
 * granted `<schema>_client`, and one with no grants at all:
 * - a client sends and reads signals; the database stamps who and when, whatever it sends;
 * - it can neither change nor delete one (42501), nor name created_role or created_at (42501);
 * - a role with no grants cannot send one;
 * - names and keys are bounded and printable, the payload an object (23514), and a 60 MB payload
 *   is refused before the row exists (54000, naming caps.inputBytes), also when it arrives
 *   compressed from the client's own table.
 */
import { describe, expect, it } from 'vitest';
import { insertSignal } from '../../src/db/queries.js';
import { createLoginRole, createSecuredSchema, refused, securityEnv, onCleanup } from './helpers.js';
import pg from 'pg';

const SIXTY_MB = 60 * 1024 * 1024;

async function failsWith(promise: Promise<unknown>, code: string, what: RegExp): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e as { code?: string; message: string },
  );
  expect(err, `expected the statement to fail with ${code}`).toBeDefined();
  expect(err!.code, err!.message).toBe(code);
  expect(err!.message).toMatch(what);
}

describe('the signals table', () => {
  it('a client sends and reads signals; the database stamps its role and the time', async () => {
    const env = await securityEnv();
    const [sent] = await env.client.q(
      `INSERT INTO stepd.signals (name, key, payload) VALUES ('payment.received', 'order-42', '{"amount": 1200}') RETURNING id, created_role, created_at`,
    );
    expect(sent!.created_role).toBe(env.client.role);
    const [read] = await env.client.q(`SELECT name, key, payload, created_role, now() - created_at < interval '1 minute' AS recent FROM stepd.signals WHERE id = $1`, [sent!.id]);
    expect(read).toEqual({ name: 'payment.received', key: 'order-42', payload: { amount: 1200 }, created_role: env.client.role, recent: true });
    // The named query function, on a connection whose search_path names the schema (as stepd's are).
    const conn = await env.client.pool.connect();
    await conn.query(`SET search_path = ${env.t.schema}`);
    const row = await insertSignal(conn, { name: 'order.cancelled', payload: { a: 1 } }).finally(() => conn.release(true));
    expect(row).toMatchObject({ name: 'order.cancelled', key: null, payload: { a: 1 }, created_role: env.client.role });
    expect(typeof row.id).toBe('string');
  });

  it('a client can neither change nor delete a signal, nor name who sent it or when', async () => {
    const env = await securityEnv();
    const [sent] = await env.client.q(`INSERT INTO stepd.signals (name, key) VALUES ('payment.received', 'order-1') RETURNING id`);
    await refused(env.client.q(`UPDATE stepd.signals SET payload = '{"amount": 1}' WHERE id = $1`, [sent!.id]), /permission denied/);
    await refused(env.client.q(`DELETE FROM stepd.signals WHERE id = $1`, [sent!.id]), /permission denied/);
    await refused(env.client.q(`TRUNCATE stepd.signals`), /permission denied/);
    await env.client.session(async (run) => {
      await run('BEGIN');
      await refused(run(`LOCK TABLE stepd.signals IN EXCLUSIVE MODE`), /permission denied/);
    });
    await refused(env.client.q(`INSERT INTO stepd.signals (name, created_role) VALUES ('x', 'postgres')`), /permission denied/);
    await refused(env.client.q(`INSERT INTO stepd.signals (name, created_at) VALUES ('x', now() - interval '1 day')`), /permission denied/);
    await failsWith(env.client.q(`INSERT INTO stepd.signals (id, name) VALUES (1, 'x')`), '428C9', /non-DEFAULT value into column "id"/);
    // The executor's role holds table-level UPDATE and DELETE: the trigger still refuses rewriting.
    await failsWith(env.t.q(`UPDATE stepd.signals SET key = 'order-2' WHERE id = $1`, [sent!.id]), '42501', /immutable fact/);
    // A trusted role forging the stamp on insert is overruled by the database.
    const [forged] = await env.t.q(`INSERT INTO stepd.signals (name, created_role, created_at) VALUES ('x', 'someone', '2001-01-01') RETURNING created_role, created_at`);
    expect(forged!.created_role).toBe('postgres');
    expect(new Date(forged!.created_at).getFullYear()).toBeGreaterThan(2001);
    expect(await env.t.q(`SELECT key FROM stepd.signals WHERE id = $1`, [sent!.id])).toEqual([{ key: 'order-1' }]);
    // Retention (a trusted role) may delete.
    await env.t.q(`DELETE FROM stepd.signals WHERE id = $1`, [sent!.id]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a role with no grants can neither send nor read signals', async () => {
    const t = await createSecuredSchema();
    const { url } = await createLoginRole(t, null, `nogrant_${Date.now().toString(36)}`);
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    onCleanup(() => pool.end());
    await refused(pool.query(`INSERT INTO ${t.schema}.signals (name) VALUES ('payment.received')`), /permission denied/);
    await refused(pool.query(`SELECT * FROM ${t.schema}.signals`), /permission denied/);
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.signals`)).toEqual([{ n: 0 }]);
  });

  it('names and keys are bounded and printable; the payload is an object', async () => {
    const env = await securityEnv();
    const bad: [string, unknown[]][] = [
      [`INSERT INTO stepd.signals (name) VALUES ('')`, []],
      [`INSERT INTO stepd.signals (name) VALUES (repeat('n', 201))`, []],
      [`INSERT INTO stepd.signals (name) VALUES ($1)`, ['pay\nment']],
      [`INSERT INTO stepd.signals (name) VALUES ($1)`, ['pay\u0085ment']],
      [`INSERT INTO stepd.signals (name, key) VALUES ('a', '')`, []],
      [`INSERT INTO stepd.signals (name, key) VALUES ('a', repeat('k', 501))`, []],
      [`INSERT INTO stepd.signals (name, key) VALUES ('a', $1)`, ['order\t42']],
      [`INSERT INTO stepd.signals (name, payload) VALUES ('a', '[1, 2]')`, []],
      [`INSERT INTO stepd.signals (name, payload) VALUES ('a', '"text"')`, []],
    ];
    for (const [sql, values] of bad) await failsWith(env.client.q(sql, values), '23514', /violates check constraint "signals_/);
    await failsWith(env.client.q(`INSERT INTO stepd.signals (name, payload) VALUES ('a', NULL)`), '23502', /payload/);
    // At the bounds: accepted (200 bytes of name in two-byte letters, 500 of key).
    await env.client.q(`INSERT INTO stepd.signals (name, key) VALUES (repeat('é', 100), repeat('k', 500))`);
  });

  it('a 60 MB payload is refused by SQL before the row exists, also when it arrives compressed', async () => {
    const env = await securityEnv({ config: { caps: { inputBytes: 100_000 } } });
    await failsWith(
      env.client.q(`INSERT INTO stepd.signals (name, payload) VALUES ('big', jsonb_build_object('blob', repeat('x', $1)))`, [SIXTY_MB]),
      '54000',
      /the signal's payload is \d+ bytes as JSON, above caps\.inputBytes \(100000 bytes\)/,
    );
    await env.client.session(async (run) => {
      await run(`CREATE TEMP TABLE blobs AS SELECT jsonb_build_object('blob', repeat('x', 6000000)) AS v`);
      await failsWith(run(`INSERT INTO stepd.signals (name, payload) SELECT 'big', v FROM blobs`), '54000', /caps\.inputBytes/);
    });
    // Within the cap (above the 4 KiB shortcut): accepted.
    await env.client.q(`INSERT INTO stepd.signals (name, payload) VALUES ('fits', jsonb_build_object('blob', repeat('x', 50000)))`);
    expect(await env.t.q(`SELECT name FROM stepd.signals ORDER BY id`)).toEqual([{ name: 'fits' }]);
    await env.bystander.assertUndisturbedAndServed();
  });
});
