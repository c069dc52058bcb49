/**
 * `stepd trigger add|list|remove|sql`: the built CLI against the real database (own schema per
 * test). What the database does with a trigger is covered in test/integration/signalTriggers.test.ts
 * and test/security/signalTriggers.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { createClientRole } from '../security/helpers.js';
import { envFor, runCli } from './helpers.js';

const echoFlow = { start: 'say', steps: { say: { tool: 'core.echo', args: { got: '{{input}}' }, done: true, output: '{{result}}' } } };

describe('stepd trigger', () => {
  it('adds, lists and removes a trigger with --json, and refuses an unknown flow, bad template JSON, an unknown template and another role’s trigger with exit 1', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('ship', $1)`, [JSON.stringify(echoFlow)]);
    const env = envFor(t);

    const added = await runCli(['trigger', 'add', 'ship-paid', '--signal', 'payment.received', '--flow', 'ship', '--input', '{"order": "{{signal.key}}"}', '--user', 'bot', '--json'], { env });
    expect(added.stderr).toBe('');
    expect(added.code).toBe(0);
    expect(JSON.parse(added.stdout)).toMatchObject({ name: 'ship-paid', signal: 'payment.received', flow: 'ship', input: { order: '{{signal.key}}' }, user: 'bot', role: 'postgres', owner: 'postgres', created: true });
    const plain = await runCli(['trigger', 'add', 'ship-any', '--signal', 'payment.received', '--flow', 'ship'], { env });
    expect(plain.stdout).toContain('added trigger ship-any: signal payment.received starts flow ship');

    const listed = await runCli(['trigger', 'list', '--json'], { env });
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ name: 'ship-any', input: '{{signal.payload}}', user: null }),
      expect.objectContaining({ name: 'ship-paid', user: 'bot' }),
    ]);
    const text = await runCli(['trigger', 'list'], { env });
    expect(text.stdout).toMatch(/^ship-paid {2}signal payment\.received {2}flow ship {2}as bot {2}input \{"order":"\{\{signal\.key\}\}"\} {2}by postgres$/m);

    for (const [args, message] of [
      [['--flow', 'ghost'], 'flow "ghost" is not registered'],
      [['--flow', 'ship', '--input', '{order'], '--input is not valid JSON'],
      [['--flow', 'ship', '--input', '[1]'], '--input must be a JSON object'],
      [['--flow', 'ship', '--input', '{"a": "{{input.x}}"}'], 'template {{input.x}} is not known'],
    ] as const) {
      const r = await runCli(['trigger', 'add', 'x', '--signal', 's', ...args], { env });
      expect([r.code, r.stderr]).toEqual([1, expect.stringContaining(message)]);
    }
    const badName = await runCli(['trigger', 'add', 'no spaces', '--signal', 's', '--flow', 'ship'], { env });
    expect([badName.code, badName.stderr]).toEqual([1, expect.stringContaining('trigger name "no spaces" is not valid')]);

    // Another role's trigger: neither replaced nor removed.
    const other = await createClientRole(t);
    const otherEnv = { ...env, DATABASE_URL: other.url };
    const replace = await runCli(['trigger', 'add', 'ship-paid', '--signal', 'x', '--flow', 'ship'], { env: otherEnv });
    expect([replace.code, replace.stderr]).toEqual([1, expect.stringContaining('trigger ship-paid belongs to role postgres')]);
    const steal = await runCli(['trigger', 'remove', 'ship-paid'], { env: otherEnv });
    expect([steal.code, steal.stderr]).toEqual([1, expect.stringContaining('may not remove it')]);

    const removed = await runCli(['trigger', 'remove', 'ship-paid', '--json'], { env });
    expect(removed.code).toBe(0);
    expect(JSON.parse(removed.stdout)).toMatchObject({ name: 'ship-paid', removed: true });
    const again = await runCli(['trigger', 'remove', 'ship-paid'], { env });
    expect([again.code, again.stderr]).toEqual([1, expect.stringContaining('no trigger named "ship-paid"')]);
  });

  it('sql prints quoted, schema-qualified statements without a connection, and refuses bad --on and --table', async () => {
    const r = await runCli(['trigger', 'sql', '--table', 'app.Orders', '--on', 'insert, delete', '--signal', "order.changed'; DROP TABLE x; --", '--key', 'Order Id', '--schema', 'stepd_x']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('CREATE OR REPLACE FUNCTION "app"."stepd_signal_orders_order_changed_drop_table_x"() RETURNS trigger');
    expect(r.stdout).toContain(`INSERT INTO "stepd_x"."signals" (name, key, payload)`);
    expect(r.stdout).toContain(`VALUES ('order.changed''; DROP TABLE x; --', (r."Order Id")::pg_catalog.text, pg_catalog.to_jsonb(r));`);
    expect(r.stdout).toContain('AFTER INSERT OR DELETE ON "app"."Orders"');
    const badOn = await runCli(['trigger', 'sql', '--table', 'app.orders', '--on', 'insert,truncate', '--signal', 's']);
    expect([badOn.code, badOn.stderr]).toEqual([1, expect.stringContaining('--on must list row changes among insert, update and delete')]);
    const badTable = await runCli(['trigger', 'sql', '--table', 'a.b.c', '--signal', 's']);
    expect([badTable.code, badTable.stderr]).toEqual([1, expect.stringContaining('give schema.table or table')]);
  });

  it('has --help with examples for each subcommand', async () => {
    for (const sub of ['add', 'list', 'remove', 'sql']) {
      const r = await runCli(['trigger', sub, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('Examples:');
    }
  });
});
