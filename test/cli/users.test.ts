/** `run` and `approve` pick the user the same way: --user / --by, else STEPD_USER, else the OS user; --help says so. */
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestSchema, startExecutor, waitForStep } from '../helpers/db.js';
import { EXAMPLES, envFor, runCli } from './helpers.js';

const approval = path.join(EXAMPLES, 'approval.json');
const idOf = (stdout: string) => /^started workflow (\d+)/m.exec(stdout)![1]!;

describe('the user of run and approve', () => {
  it('is --user / --by, else STEPD_USER, else the OS user, for both commands', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const osUser = os.userInfo().username;

    const flagged = await runCli(['run', approval, '--user', 'james'], { env: { ...envFor(t), STEPD_USER: 'alice' } });
    const fromEnv = await runCli(['run', approval], { env: { ...envFor(t), STEPD_USER: 'alice' } });
    const fromOs = await runCli(['run', approval], { env: envFor(t) });
    expect(fromEnv.stdout).toMatch(/^started workflow \d+ \(approval\) as alice$/m);
    const createdBy = async (r: { stdout: string }) => (await t.q(`SELECT created_by FROM stepd.workflows WHERE id = $1`, [idOf(r.stdout)]))[0].created_by;
    expect([await createdBy(flagged), await createdBy(fromEnv), await createdBy(fromOs)]).toEqual(['james', 'alice', osUser]);

    const gates = await Promise.all([flagged, fromEnv, fromOs].map((r) => waitForStep(t, idOf(r.stdout), 'request_approval', 'pending')));
    expect((await runCli(['approve', gates[0]!.id, '--by', 'james'], { env: { ...envFor(t), STEPD_USER: 'alice' } })).code).toBe(0);
    const byEnv = await runCli(['approve', gates[1]!.id], { env: { ...envFor(t), STEPD_USER: 'alice' } });
    expect(byEnv.stdout).toMatch(/ as alice$/m);
    expect((await runCli(['approve', gates[2]!.id], { env: envFor(t) })).code).toBe(0);
    const readiedBy = await t.q(`SELECT readied_by FROM stepd.workflow_steps WHERE id = ANY($1::bigint[]) ORDER BY id`, [gates.map((g) => g.id)]);
    expect(readiedBy.map((r) => r.readied_by)).toEqual(['james', 'alice', osUser]);
  });

  it('--help of both commands says how the user is chosen', async () => {
    for (const [command, option] of [['run', '--user'], ['approve', '--by']] as const) {
      const help = (await runCli([command, '--help'])).stdout.replace(/\s+/g, ' ');
      expect(help).toMatch(new RegExp(`${option} <user> .*Default: \\$STEPD_USER, else your OS user name`));
    }
  });
});
