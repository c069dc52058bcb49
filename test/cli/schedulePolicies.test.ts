/**
 * `stepd schedule add --overlap --catch-up` and `stepd schedule pause|resume`: the built CLI on
 * the real database. What the policies do at a tick is in test/schedules/policies.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

const ECHO = { start: 'say', steps: { say: { tool: 'core.echo', args: {} } } };

describe('stepd schedule policies', () => {
  it('adds with --overlap and --catch-up, lists them, pauses and resumes; refuses unknown values and names', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('etl', $1)`, [JSON.stringify(ECHO)]);
    const env = envFor(t);

    const added = await runCli(['schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--flow', 'etl', '--overlap', 'skip', '--catch-up', 'latest'], { env });
    expect(added.stderr).toBe('');
    expect(added.stdout).toContain('overlap skip, catch-up latest');
    const listed = await runCli(['schedule', 'list'], { env });
    expect(listed.stdout).toMatch(/^nightly {2}"0 2 \* \* \*" \(UTC\) {2}flow etl {2}next \S+ {2}by postgres {2}overlap skip {2}catch-up latest$/m);

    const paused = await runCli(['schedule', 'pause', 'nightly', '--json'], { env });
    expect(paused.code, paused.stderr).toBe(0);
    expect(JSON.parse(paused.stdout)).toMatchObject({ name: 'nightly', paused: true, changed: true, overlap: 'skip', catchUp: 'latest' });
    const again = await runCli(['schedule', 'pause', 'nightly'], { env });
    expect(again.stdout.trim()).toBe('schedule nightly was already paused');
    expect((await runCli(['schedule', 'list'], { env })).stdout).toMatch(/next paused/);
    expect(JSON.parse((await runCli(['schedule', 'list', '--json'], { env })).stdout)[0]).toMatchObject({ paused: true, next: null });

    const resumed = await runCli(['schedule', 'resume', 'nightly'], { env });
    expect(resumed.stdout.trim()).toBe('resumed schedule nightly: the daemon starts its next tick');
    expect(await t.q(`SELECT paused, overlap, catch_up FROM stepd.schedules`)).toEqual([{ paused: false, overlap: 'skip', catch_up: 'latest' }]);

    // Replacing resets the policies to what is given (defaults otherwise), and keeps a pause.
    await runCli(['schedule', 'pause', 'nightly'], { env });
    await runCli(['schedule', 'add', 'nightly', '--cron', '0 3 * * *', '--flow', 'etl'], { env });
    expect(await t.q(`SELECT paused, overlap, catch_up FROM stepd.schedules`)).toEqual([{ paused: true, overlap: 'allow', catch_up: 'none' }]);

    const bad = await runCli(['schedule', 'add', 'x', '--cron', '0 2 * * *', '--flow', 'etl', '--overlap', 'sometimes'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/Allowed choices are skip, allow, cancel-previous/);
    const missing = await runCli(['schedule', 'resume', 'ghost'], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('there is no schedule named "ghost"');
  });
});
