/**
 * The same attacks against the real daemon: `stepd start` as a child process reading a
 * stepd.config.json with `clients`, `caps` and `http`, attacked by a non-superuser role granted
 * `<schema>_client`. This proves the CLI wires each config section into the executor as the
 * in-process tests do, and that the process keeps running through every attack.
 * Needs dist/ (`sh scripts/node22.sh npx tsc -p tsconfig.json`).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnStepd, waitForLog } from '../tools/stepdProcess.js';
import { randomBytes } from 'node:crypto';
import {
  ProbeTools,
  clientInsert,
  createClientRole,
  createLoginRole,
  createSecuredSchema,
  getSteps,
  getWorkflow,
  insertWorkflow,
  onCleanup,
  refused,
  schemaRoles,
  startConfiguredExecutor,
  startLocalServer,
  waitFor,
  waitForStep,
  waitForWorkflow,
} from './helpers.js';
import { tempDirSync } from '../helpers/isolation.js';

const GATE_FLOW = { start: 'approve', steps: { approve: { approval: true, next: 'done' }, done: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } } };

describe('the stepd daemon under attack', () => {
  it('refuses every attack by config and role, and keeps serving the honest contract', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const server = await startLocalServer();
    const dir = tempDirSync('stepd-security-');
    const configPath = path.join(dir, 'stepd.config.json');
    writeFileSync(
      configPath,
      JSON.stringify({ clients: { [client.role]: { actAs: ['team-*'] } }, caps: { inputBytes: 4_000, forEachItems: 10 }, http: { allow: [] } }),
    );
    const daemon = spawnStepd(['start', '--database-url', t.url, '--schema', t.schema, '--config', configPath, '--poll-interval', '50ms', '--executor-id', 'security-daemon'], { cwd: dir });
    onCleanup(async () => void (await daemon.stop()));
    await waitForLog(daemon, 'executor started');

    // Honest: a gate the client approves.
    const honest = await clientInsert(client, GATE_FLOW, { user: 'team-a' });
    const gate = await waitForStep(t, honest, 'approve', 'pending');

    // Attacks.
    await client.session(async (run) => {
      await run(`SET stepd.executor = 'on'`);
      await refused(run(`UPDATE stepd.workflow_steps SET status = 'done', result = '{"forged": true}' WHERE id = $1`, [gate.id]), /can only be set to 'ready'|permission denied/);
      await refused(run(`INSERT INTO stepd.workflow_steps (workflow_id, name, tool, status) VALUES ($1, 'done', 'http.request', 'ready')`, [honest]), /steps are created by the executor|permission denied/);
      await refused(run(`UPDATE stepd.workflows SET created_by = 'admin' WHERE id = $1`, [honest]), /still 'new'|permission denied/);
    });
    const impersonating = await clientInsert(client, GATE_FLOW, { user: 'admin' });
    // Over the daemon's caps.inputBytes: refused by the database at INSERT (sql/0021, the caps the daemon wrote).
    const oversized = await clientInsert(client, GATE_FLOW, { input: { blob: 'x'.repeat(10_000) } }).then(
      () => undefined,
      (e: { code?: string; message: string }) => e,
    );
    expect(oversized).toMatchObject({ code: '54000', message: expect.stringContaining('caps.inputBytes (4000 bytes)') });
    const tooMany = await clientInsert(
      client,
      { start: 'each', steps: { each: { forEach: { items: '{{input.items}}', step: 'w' }, join: 'end' }, w: { tool: 'core.noop' }, end: { tool: 'core.noop', done: true } } },
      { input: { items: Array.from({ length: 50 }, (_, i) => i) } },
    );
    const loopback = await clientInsert(client, { start: 'c', steps: { c: { tool: 'http.request', args: { url: server.base }, retry: { maxAttempts: 1 }, done: true } } });
    const bomb = await clientInsert(client, {
      start: 'a',
      steps: { a: { tool: 'core.noop', branch: [{ if: 'input.l.all(x, input.l.all(y, input.l.all(z, true)))', then: 'b' }], default: 'b' }, b: { tool: 'core.noop', done: true } },
    }, { input: { l: Array.from({ length: 500 }, (_, i) => i) } });

    expect((await waitForWorkflow(t, impersonating)).error).toMatchObject({ code: 'permission_denied', message: expect.stringContaining(client.role) });
    expect(JSON.stringify((await waitForWorkflow(t, tooMany)).error)).toContain('forEachItems');
    expect((await waitForWorkflow(t, loopback)).error).toMatchObject({ code: 'egress_denied' });
    expect((await waitForWorkflow(t, bomb)).error).toMatchObject({ code: 'budget_exceeded' });
    expect(server.connections()).toBe(0);

    // Still alive and serving: the approved gate completes its workflow.
    await client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true}' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    expect(await waitForWorkflow(t, honest)).toMatchObject({ status: 'completed', output: { ok: true } });
    expect((await getSteps(t, honest)).map((s) => [s.name, s.status])).toEqual([['approve', 'done'], ['done', 'done']]);
    expect(daemon.child.exitCode).toBeNull();
    expect(await daemon.stop()).toEqual({ code: 0, signal: null });
  });

  it('runs as a non-superuser member of <schema>_executor, as a deployment would', async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const executor = await createLoginRole(t, schemaRoles(t.schema).executor, `exe_${randomBytes(5).toString('hex')}`);
    const dir = tempDirSync('stepd-security-');
    const daemon = spawnStepd(['start', '--database-url', executor.url, '--schema', t.schema, '--poll-interval', '50ms', '--executor-id', 'member-daemon'], { cwd: dir });
    onCleanup(async () => void (await daemon.stop()));
    await waitForLog(daemon, 'executor started');

    const fanout = {
      start: 'approve',
      steps: {
        approve: { approval: true, next: 'each' },
        each: { forEach: { items: '{{input.items}}', step: 'w' }, join: 'end' },
        w: { tool: 'core.echo', args: { i: '{{item}}' } },
        end: { tool: 'core.echo', args: { n: '{{results}}' }, done: true, output: '{{result}}' },
      },
    };
    const id = await clientInsert(client, fanout, { input: { items: [1, 2, 3] } });
    const gate = await waitForStep(t, id, 'approve', 'pending');
    await client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ n: [{ i: 1 }, { i: 2 }, { i: 3 }] });
    const [row] = await t.q(`SELECT created_role FROM stepd.workflows WHERE id = $1`, [id]);
    expect(row.created_role).toBe(client.role);
    // The client stays a client beside it.
    await refused(client.q(`UPDATE stepd.workflows SET status = 'new' WHERE id = $1`, [id]), /can only be set to 'cancelled'|permission denied/);
    expect(daemon.child.exitCode).toBeNull();
    expect(await daemon.stop()).toEqual({ code: 0, signal: null });
  });

  it("a daemon started with a client role's credentials gets no further than the client", async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    const id = await insertWorkflow(t, GATE_FLOW, {}, { user: 'victim' });
    const dir = tempDirSync('stepd-security-');
    const rogue = spawnStepd(['start', '--database-url', client.url, '--schema', t.schema, '--poll-interval', '50ms', '--executor-id', 'rogue'], { cwd: dir });
    onCleanup(async () => void (await rogue.stop()));
    // It either refuses to start or keeps failing its writes; either way it is told no.
    const outcome = await Promise.race([
      rogue.exited.then(() => 'exited' as const),
      waitFor(() => rogue.logs().some((l) => typeof l.level === 'number' && l.level >= 40), 'the rogue daemon to report a refusal').then(() => 'refused' as const),
    ]);
    expect(['exited', 'refused']).toContain(outcome);
    expect(await getWorkflow(t, id)).toMatchObject({ status: 'new', started_at: null });
    expect(await getSteps(t, id)).toEqual([]);
    await rogue.stop();
    // The real executor then serves it as usual.
    const probe = new ProbeTools();
    await startConfiguredExecutor(t, {}, { providers: [probe] });
    await waitForStep(t, id, 'approve', 'pending');
  });
});
