/**
 * The tenant rules of sql/0038 as a CLI user meets them: `stepd cancel` and `stepd approve` run
 * as a LOGIN role granted `<schema>_client` on another role's workflow exit 1 with the rule and
 * its hint (who may), and change nothing; on the role's own workflow they work as before.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getWorkflow, insertWorkflow, onCleanup, startExecutor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { clientEnv, runCli } from './helpers.js';

const GATE = { start: 'ok', steps: { ok: { approval: true, done: true } } };

describe('another role’s workflow from the CLI', () => {
  it('cancel and approve are refused naming the rule; the role’s own work is not', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const { role, env } = await clientEnv(t, 'shop');
    // Another service's workflow (the superuser's), waiting at its gate.
    const theirs = await insertWorkflow(t, GATE, {}, { user: 'alice' });
    const gate = await waitForStep(t, theirs, 'ok', 'pending');

    const cancel = await runCli(['cancel', theirs], { env });
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toContain(`role ${role} may cancel only the workflows of its own role or of users it may act as`);
    expect(cancel.stderr).toContain('clients.actAs');
    const approve = await runCli(['approve', gate.id], { env });
    expect(approve.code).toBe(1);
    expect(approve.stderr).toContain(`role ${role} may ready only the steps of its own role's workflows or of users it may act as`);
    expect((await getWorkflow(t, theirs)).status).toBe('running');

    // Its own (written as the role) it cancels as before.
    const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: 1 });
    // The role's cleanup may terminate this idle connection before the pool ends (57P01).
    pool.on('error', () => {});
    onCleanup(() => pool.end().catch(() => {}));
    const { rows } = await pool.query<{ id: string }>(`INSERT INTO ${t.schema}.workflows (name, flow, input) VALUES ('mine', $1, '{}') RETURNING id`, [JSON.stringify(GATE)]);
    await waitForStep(t, rows[0]!.id, 'ok', 'pending');
    const own = await runCli(['cancel', rows[0]!.id], { env });
    expect(own.stderr).toBe('');
    expect(own.code).toBe(0);
    expect((await waitForWorkflow(t, rows[0]!.id)).status).toBe('cancelled');
  }, 60_000);
});
