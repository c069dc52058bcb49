/**
 * Signal triggers (sql/0026) against the real database: the database starts one workflow per
 * committed signal and trigger, in the signal's own transaction (key signal:TRIGGER:<id>), so
 * concurrent senders start exactly one each and a rolled-back signal starts nothing; input
 * templates resolve in SQL; `stepd trigger sql`'s output, installed on a real application table,
 * sends a signal (and so starts the triggered workflow) for a committed row change only.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { tableTriggerSql } from '../../src/signals/tableTriggerSql.js';
import { createTestSchema, getSteps, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { createClientRole } from '../security/helpers.js';

const ECHO_INPUT = { start: 'a', steps: { a: { tool: 'core.echo', args: { got: '{{input}}' }, done: true, output: '{{result.got}}' } } };

async function registerEcho(t: TestSchema, name = 'echo'): Promise<void> {
  await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2)`, [name, JSON.stringify(ECHO_INPUT)]);
}

async function triggeredWorkflows(t: TestSchema): Promise<{ id: string; key: string; status: string; input: any; output: any; error: any }[]> {
  return t.q(`SELECT id::text, key, status, input, output, error FROM stepd.workflows WHERE key LIKE 'signal:%' ORDER BY key`);
}

describe('each committed signal starts exactly one workflow per matching trigger', () => {
  it('with 8 concurrent senders (single and multi-row inserts), a rolled-back sender and a signal of another name', async () => {
    const t = await createTestSchema();
    await registerEcho(t);
    await startExecutor(t, { concurrency: 16 });
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('one', 'order.paid', 'echo'), ('two', 'order.paid', 'echo'), ('other', 'order.cancelled', 'echo')`);

    const senders = Array.from({ length: 8 }, (_, s) => async () => {
      const conn = await t.db.connect();
      try {
        for (let i = 0; i < 5; i++) {
          await conn.query(`INSERT INTO ${t.schema}.signals (name, key, payload) VALUES ('order.paid', $1, $2)`, [`o-${s}-${i}`, JSON.stringify({ s, i })]);
        }
        // Three in one statement, in a transaction of the sender's own.
        await conn.query('BEGIN');
        await conn.query(
          `INSERT INTO ${t.schema}.signals (name, key, payload) SELECT 'order.paid', 'multi-' || $1 || '-' || n, jsonb_build_object('s', $1::int, 'm', n) FROM generate_series(1, 3) n`,
          [s],
        );
        await conn.query('COMMIT');
        // A business transaction that rolls back: its signal never existed, so nothing starts.
        await conn.query('BEGIN');
        await conn.query(`INSERT INTO ${t.schema}.signals (name, key, payload) VALUES ('order.paid', 'rolled-back', '{"rolledBack": true}')`);
        await conn.query('ROLLBACK');
      } finally {
        conn.release();
      }
    });
    await Promise.all(senders.map((send) => send()));
    await t.q(`INSERT INTO stepd.signals (name, key) VALUES ('order.shipped', 'x')`);

    const signals = await t.q<{ id: string; payload: unknown }>(`SELECT id::text, payload FROM stepd.signals WHERE name = 'order.paid' ORDER BY id`);
    expect(signals).toHaveLength(8 * 8);
    const expected = signals.flatMap((s) => [`signal:one:${s.id}`, `signal:two:${s.id}`]).sort();
    const rows = await waitFor(async () => {
      const all = await triggeredWorkflows(t);
      return all.length === expected.length && all.every((w) => w.status === 'completed') ? all : undefined;
    }, 'every triggered workflow to complete');
    expect(rows.map((w) => w.key)).toEqual(expected);
    const payloadOf = new Map(signals.map((s) => [s.id, s.payload]));
    for (const w of rows) expect(w.output).toEqual(payloadOf.get(w.key.split(':')[2]!));
    expect(rows.some((w) => JSON.stringify(w.input).includes('rolledBack'))).toBe(false);
    // A trigger added later does not start workflows for signals sent before it.
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('late', 'order.paid', 'echo')`);
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.workflows WHERE key LIKE 'signal:late:%'`)).toEqual([{ n: 0 }]);
  });
});

describe('input templates', () => {
  it('resolve {{signal.*}} in SQL, keeping types for whole-string templates; a path the payload lacks fails that workflow with invalid_input, never the signal', async () => {
    const t = await createTestSchema();
    await registerEcho(t);
    await startExecutor(t);
    const template = {
      order: '{{signal.key}}',
      amount: '{{signal.payload.amount}}',
      first: '{{ signal.payload.items[0] }}',
      line: 'order {{signal.key}}: {{signal.payload.amount}} for {{signal.payload.items[1].sku}}',
      signal: { id: '{{signal.id}}', name: '{{signal.name}}', role: '{{signal.role}}', at: '{{signal.at}}' },
      list: ['{{signal.payload.items}}', 'plain', 7, null],
    };
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow, input) VALUES ('full', 'paid', 'echo', $1)`, [JSON.stringify(template)]);
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('whole', 'paid', 'echo')`);
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow, input) VALUES ('missing', 'paid', 'echo', '{"x": "{{signal.payload.nope}}"}')`);
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow, input) VALUES ('scalar', 'paid', 'echo', '"{{signal.payload.amount}}"')`);

    const payload = { amount: 1200, items: [{ sku: 'a' }, { sku: 'b' }] };
    const [sig] = await t.q<{ id: string; at: string }>(
      `INSERT INTO stepd.signals (name, key, payload) VALUES ('paid', 'order-42', $1)
       RETURNING id::text, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`,
      [JSON.stringify(payload)],
    );
    const byKey = async (trigger: string) => {
      const [row] = await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE key = $1`, [`signal:${trigger}:${sig!.id}`]);
      return waitForWorkflow(t, row!.id);
    };
    const full = await byKey('full');
    expect(full.status, JSON.stringify(full.error)).toBe('completed');
    expect(full.input).toEqual({
      order: 'order-42',
      amount: 1200,
      first: { sku: 'a' },
      line: 'order order-42: 1200 for b',
      signal: { id: sig!.id, name: 'paid', role: 'postgres', at: sig!.at },
      list: [payload.items, 'plain', 7, null],
    });
    expect(full.output).toEqual(full.input);
    expect((await byKey('whole')).output).toEqual(payload);
    for (const [trigger, message] of [
      ['missing', /template \{\{signal\.payload\.nope\}\} has no value in signal/],
      ['scalar', /gave number .*not a JSON object/],
    ] as const) {
      const wf = await byKey(trigger);
      expect(wf.status).toBe('failed');
      expect(wf.error).toMatchObject({ code: 'invalid_input', details: { trigger, signal: sig!.id } });
      expect((wf.error as { message: string }).message).toMatch(message);
      expect(await getSteps(t, wf.id)).toEqual([]);
    }
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.signals`)).toEqual([{ n: 1 }]);
  });

  it('are checked when the trigger is written: unknown roots, bad paths, non-object templates, too many templates, an unregistered flow', async () => {
    const t = await createTestSchema();
    await registerEcho(t);
    const add = (input: unknown, flow = 'echo') => t.q(`INSERT INTO stepd.triggers (name, signal, flow, input) VALUES ('x', 'y', $2, $1)`, [JSON.stringify(input), flow]);
    const refusal = async (input: unknown, rule: RegExp, flow?: string) => {
      const err = await add(input, flow).then(() => undefined, (e: { code: string; message: string }) => e);
      expect(err?.code).toBe('23514');
      expect(err?.message).toMatch(rule);
    };
    await refusal({ a: '{{input.x}}' }, /template \{\{input\.x\}\} is not known/);
    await refusal({ a: '{{signal.payload.a b}}' }, /is not known/);
    await refusal({ a: 'x {{signal.secret}}' }, /is not known/);
    await refusal('plain text', /must be a JSON object/);
    await refusal([1], /must be a JSON object/);
    await refusal(Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, '{{signal.key}}'])), /33 templates; at most 32/);
    await refusal({}, /names flow "ghost", which is not registered/, 'ghost');
    await add({ a: '{{signal.payload.a-b.c_d.0}}', b: ['{{signal.payload[0]}}'] });
  });
});

describe('stepd trigger sql', () => {
  it("installed on a real table app_orders: a committed row change sends a signal and starts the triggered workflow; a rolled-back one sends nothing", async () => {
    const t = await createTestSchema();
    await registerEcho(t);
    await startExecutor(t);
    const app = `${t.schema}_app`;
    await t.db.query(`CREATE SCHEMA ${pg.escapeIdentifier(app)}`);
    onCleanup(async () => void (await t.db.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(app)} CASCADE`)));
    await t.db.query(`CREATE TABLE ${pg.escapeIdentifier(app)}.app_orders (id bigint PRIMARY KEY, "Total" numeric NOT NULL, status text NOT NULL)`);
    const sql = tableTriggerSql({ schema: t.schema, table: `${app}.app_orders`, on: ['insert', 'update'], signal: 'order.changed', keyColumn: 'id' });
    await t.db.query(sql);
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('orders', 'order.changed', 'echo')`);
    // The application's own role changes the table: it holds <schema>_client (to send signals) and its table grants.
    const service = await createClientRole(t);
    await t.db.query(`GRANT USAGE ON SCHEMA ${pg.escapeIdentifier(app)} TO ${pg.escapeIdentifier(service.role)}`);
    await t.db.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${pg.escapeIdentifier(app)}.app_orders TO ${pg.escapeIdentifier(service.role)}`);

    const conn = await service.pool.connect();
    onCleanup(async () => conn.release(true));
    await conn.query('BEGIN');
    await conn.query(`INSERT INTO ${app}.app_orders (id, "Total", status) VALUES (42, 12.5, 'new')`);
    await conn.query('COMMIT');
    await conn.query('BEGIN');
    await conn.query(`UPDATE ${app}.app_orders SET status = 'paid' WHERE id = 42`);
    await conn.query(`INSERT INTO ${app}.app_orders (id, "Total", status) VALUES (43, 1, 'new')`);
    await conn.query('ROLLBACK');
    // Delete was not asked for (--on insert,update): no signal.
    await conn.query(`DELETE FROM ${app}.app_orders WHERE id = 42`);

    const signals = await t.q(`SELECT id::text, name, key, payload, created_role FROM stepd.signals ORDER BY id`);
    expect(signals).toEqual([{ id: expect.any(String), name: 'order.changed', key: '42', payload: { id: 42, Total: 12.5, status: 'new' }, created_role: service.role }]);
    const [wf] = await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE key = $1`, [`signal:orders:${signals[0].id}`]);
    const done = await waitForWorkflow(t, wf!.id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.output).toEqual({ id: 42, Total: 12.5, status: 'new' });
    // Triggered by an operator's trigger without --user: it ran as the role that changed the row.
    expect(done.created_by).toBe(service.role);
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.workflows`)).toEqual([{ n: 1 }]);
  });
});

describe('a triggered workflow that waits for a signal', () => {
  it('an order.created signal starts the order flow, which then receives its payment.received signal by key', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const order = {
      start: 'await_payment',
      steps: {
        await_payment: { signal: { name: 'payment.received', key: '{{input.orderId}}', timeout: '1m' }, next: 'ship' },
        ship: { tool: 'core.echo', args: { order: '{{input.orderId}}', paid: '{{steps.await_payment.result.payload.amount}}' }, done: true, output: '{{result}}' },
      },
    };
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('order', $1)`, [JSON.stringify(order)]);
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow, input) VALUES ('new-order', 'order.created', 'order', '{"orderId": "{{signal.key}}"}')`);
    const [created] = await t.q<{ id: string }>(`INSERT INTO stepd.signals (name, key) VALUES ('order.created', 'order-42') RETURNING id::text`);
    const [wf] = await waitFor(async () => {
      const rows = await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE key = $1`, [`signal:new-order:${created!.id}`]);
      return rows.length > 0 ? rows : undefined;
    }, 'the triggered workflow');
    await t.q(`INSERT INTO stepd.signals (name, key, payload) VALUES ('payment.received', 'order-7', '{"amount": 1}'), ('payment.received', 'order-42', '{"amount": 1200}')`);
    const done = await waitForWorkflow(t, wf!.id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.output).toEqual({ order: 'order-42', paid: 1200 });
  });
});

