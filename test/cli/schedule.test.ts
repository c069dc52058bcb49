/**
 * `stepd schedule add|list|remove` and `stepd run --at`: the built CLI against the real database
 * (own schema per test). The ticks themselves are covered in test/integration/scheduleTicks.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { bossSchemaName } from '../../src/schedules/bossSchema.js';
import { createTestSchema, getWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

const echoFlow = { start: 'say', steps: { say: { tool: 'core.echo', args: { topic: '{{input.topic}}' }, done: true, output: '{{result}}' } } };

describe('stepd schedule', () => {
  it('adds, lists and removes a schedule with --json, and refuses an unknown flow, a bad cron and an unknown time zone with exit 1', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(echoFlow)]);
    const env = envFor(t);

    const added = await runCli(['schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--flow', 'report', '--input', '{"topic":"x"}', '--tz', 'Europe/Paris', '--user', 'james', '--json'], { env });
    expect(added.stderr).toBe('');
    expect(added.code).toBe(0);
    const a = JSON.parse(added.stdout);
    expect(a).toMatchObject({ name: 'nightly', cron: '0 2 * * *', tz: 'Europe/Paris', flow: 'report', input: { topic: 'x' }, user: 'james', role: 'postgres', created: true });
    expect(a.next).toHaveLength(3);
    // The CLI writes stepd's table only: the daemon puts the schedule into pg-boss (clients have no access there).
    expect(await t.q(`SELECT key FROM ${bossSchemaName(t.schema)}.schedule`)).toEqual([]);
    expect(await t.q(`SELECT name, cron, tz, flow FROM stepd.schedules`)).toEqual([{ name: 'nightly', cron: '0 2 * * *', tz: 'Europe/Paris', flow: 'report' }]);

    const listed = await runCli(['schedule', 'list', '--json'], { env });
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ name: 'nightly', flow: 'report', next: a.next[0] })]);
    const text = await runCli(['schedule', 'list'], { env });
    expect(text.stdout).toMatch(/^nightly {2}"0 2 \* \* \*" \(Europe\/Paris\) {2}flow report {2}as james {2}next \S+ {2}by postgres$/m);

    const unknownFlow = await runCli(['schedule', 'add', 'x', '--cron', '* * * * *', '--flow', 'ghost'], { env });
    expect(unknownFlow.code).toBe(1);
    expect(unknownFlow.stderr).toContain('flow "ghost" is not registered');
    const badCron = await runCli(['schedule', 'add', 'x', '--cron', '61 * * * *', '--flow', 'report'], { env });
    expect(badCron.code).toBe(1);
    expect(badCron.stderr).toContain('cron expression "61 * * * *" cannot be read');
    const short = await runCli(['schedule', 'add', 'x', '--cron', '* * *', '--flow', 'report'], { env });
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('cron expression "* * *" has 3 field(s)');
    expect(short.stderr).toContain('use five fields');
    const badTz = await runCli(['schedule', 'add', 'x', '--cron', '* * * * *', '--flow', 'report', '--tz', 'Moon/Base'], { env });
    expect(badTz.code).toBe(1);
    expect(badTz.stderr).toContain('unknown time zone "Moon/Base"');

    const removed = await runCli(['schedule', 'remove', 'nightly', '--json'], { env });
    expect(removed.code).toBe(0);
    expect(JSON.parse(removed.stdout)).toMatchObject({ name: 'nightly', removed: true });
    expect(JSON.parse((await runCli(['schedule', 'list', '--json'], { env })).stdout)).toEqual([]);
    const again = await runCli(['schedule', 'remove', 'nightly'], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('no schedule named "nightly"');
  });

  it('has --help with examples for each subcommand', async () => {
    for (const sub of ['add', 'list', 'remove']) {
      const r = await runCli(['schedule', sub, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('Examples:');
    }
  });
});

describe('stepd run --at', () => {
  it('stores the start time; the workflow waits until then, and a far one can be cancelled before', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(echoFlow)]);
    const env = envFor(t);

    const soon = await runCli(['run', 'report', '--input', '{"topic":"soon"}', '--at', '2s', '--json'], { env });
    expect(soon.stderr).toBe('');
    const s = JSON.parse(soon.stdout);
    expect(s.startAt).toBeTruthy();
    const done = await waitForWorkflow(t, s.id);
    expect(done.status).toBe('completed');
    expect(done.started_at!.getTime()).toBeGreaterThanOrEqual(new Date(s.startAt).getTime());

    const far = await runCli(['run', 'report', '--input', '{"topic":"far"}', '--at', '2099-01-01T00:00:00Z'], { env });
    const id = /started workflow (\d+)/.exec(far.stdout)![1]!;
    expect(far.stdout).toContain('it starts at 2099-01-01T00:00:00.000Z');
    expect((await getWorkflow(t, id)).status).toBe('new');
    expect((await runCli(['cancel', id], { env })).code).toBe(0);
    expect((await getWorkflow(t, id)).status).toBe('cancelled');

    const bad = await runCli(['run', 'report', '--at', '2026-12-01T09:00'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('give the time zone');
  });
});
