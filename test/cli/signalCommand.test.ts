/**
 * `stepd signal NAME [--key K] [--payload JSON]` as a user runs it: the built CLI as a real
 * process, on real LOGIN roles (one granted `<schema>_client`, one with no grants), the rows read
 * back as the superuser. (test/cli/signals.test.ts is about OS signals reaching the daemon.)
 */
import { describe, expect, it } from 'vitest';
import { asExecutor, createTestSchema, type TestSchema } from '../helpers/db.js';
import { createLoginRole } from '../security/helpers.js';
import { clientEnv, runCli, tempDir } from './helpers.js';

async function signalRows(t: TestSchema): Promise<{ id: string; name: string; key: string | null; payload: unknown; created_role: string }[]> {
  return t.q(`SELECT id::text, name, key, payload, created_role FROM stepd.signals ORDER BY id`);
}

describe('stepd signal', () => {
  it('as a LOGIN role granted <schema>_client: inserts one signal stamped with that role and prints its id', async () => {
    const t = await createTestSchema();
    const { role, env } = await clientEnv(t, 'shop');
    const sent = await runCli(['signal', 'payment.received', '--key', 'order-42', '--payload', '{"amount": 1200}'], { env });
    expect(sent.stderr).toBe('');
    expect(sent.code).toBe(0);
    const id = sent.stdout.trim();
    expect(id).toMatch(/^[1-9]\d*$/);
    expect(await signalRows(t)).toEqual([{ id, name: 'payment.received', key: 'order-42', payload: { amount: 1200 }, created_role: role }]);

    // Without key and payload: a null key and {}; --json prints the row as the database wrote it.
    const json = await runCli(['signal', 'inventory.restocked', '--json'], { env });
    expect(json.code).toBe(0);
    const row = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(row).toMatchObject({ name: 'inventory.restocked', key: null, payload: {}, createdRole: role });
    expect(Date.parse(String(row.createdAt))).not.toBeNaN();
    expect((await signalRows(t)).map((r) => [r.id, r.key, r.payload])).toEqual([[id, 'order-42', { amount: 1200 }], [row.signalId, null, {}]]);
  });

  it('refuses a payload that is not JSON, not an object or over the size caps, an empty name or a control character, with clear messages, and inserts nothing', async () => {
    const t = await createTestSchema();
    const { env } = await clientEnv(t, 'shop');
    // The operator's cap on inputs applies to payloads (the database refuses with 54000; it looks
    // only at payloads above 4 KiB, so the one refused here is 10 kB against a cap of 5,000 bytes).
    await asExecutor(t, `UPDATE stepd.size_caps SET input_bytes = 5000`);
    const cases: [string[], RegExp][] = [
      [['signal', 'payment.received', '--payload', '{amount: 1200}'], /--payload is not valid JSON/],
      [['signal', 'payment.received', '--payload', '[1, 2]'], /--payload must be a JSON object/],
      [['signal', 'payment.received', '--payload', '"paid"'], /--payload must be a JSON object/],
      [['signal', 'payment.received', '--payload', JSON.stringify({ note: 'x'.repeat(10_000) })], /the signal's payload is \d+ bytes as JSON, above caps.inputBytes \(5000 bytes\); no signal was sent/],
      [['signal', '   '], /the signal name must not be empty; no signal was sent/],
      [['signal', 'payment\u0007received'], /no signal was sent/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, { env });
      const label = args.join(' ').slice(0, 80);
      expect(r.code, label).toBe(1);
      expect(r.stderr, label).toMatch(message);
      expect(r.stdout).toBe('');
    }
    expect(await signalRows(t)).toEqual([]);
  });

  it('as a role with no grants: refused, saying which role it lacks, and nothing is inserted', async () => {
    const t = await createTestSchema();
    const { role, url } = await createLoginRole(t, null, `nogrant_${t.schema.slice(2, 8)}`);
    const r = await runCli(['signal', 'payment.received', '--key', 'order-42'], { env: { DATABASE_URL: url, STEPD_SCHEMA: t.schema } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the database role "${role}" may not use schema "${t.schema}": it needs the role ${t.schema}_client`);
    expect(r.stdout).toBe('');
    expect(await signalRows(t)).toEqual([]);
  });

  it('without a database: exit 4 and how to get one; --help shows an example', async () => {
    const cwd = await tempDir();
    const r = await runCli(['signal', 'payment.received'], { cwd });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/no database: DATABASE_URL is not set/);
    const help = await runCli(['signal', '--help'], { cwd });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(`stepd signal payment.received --key order-42 --payload '{"amount": 1200}'`);
    expect(help.stdout).toContain('INSERT INTO stepd.signals (name, key, payload)');
  });
});
