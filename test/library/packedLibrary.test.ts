/**
 * stepd as a library, as a user gets it: the packed package installed into a new project, whose
 * app (examples/library-app/app.mjs, unchanged) imports `stepd`, runs the executor in its own
 * process with function tools, sends a signal and waits for the result, against the real
 * PostgreSQL in a fresh schema. A TypeScript file of the project type-checks against the
 * package's declarations (`stepd` and `stepd/worker`), strict, without skipLibCheck.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchemaAndRoles, TEST_DATABASE_URL } from '../helpers/db.js';
import { cleanEnv } from '../helpers/isolation.js';
import { installPackedPackage, REPO_ROOT, type PackedProject } from '../helpers/packedPackage.js';

const run = promisify(execFile);

describe('the packed package', () => {
  let project: PackedProject;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 1 });

  beforeAll(async () => {
    project = await installPackedPackage();
  });

  afterAll(async () => {
    await dropSchemaAndRoles(admin, schema);
    await admin.end();
  });

  it('ships both entry points with their declarations, and the migrations', () => {
    for (const f of ['dist/src/lib/index.js', 'dist/src/lib/index.d.ts', 'dist/src/worker/index.js', 'dist/src/worker/index.d.ts', 'sql/0001_tables.sql', 'package.json']) {
      expect(project.files).toContain(f);
    }
  });

  it('runs a flow with function tools to completion in the application\'s own process', async () => {
    const app = path.join(project.dir, 'app.mjs');
    await copyFile(path.join(REPO_ROOT, 'examples/library-app/app.mjs'), app);
    const { stdout } = await run(process.execPath, [app], {
      cwd: project.dir,
      env: cleanEnv({ DATABASE_URL: TEST_DATABASE_URL, STEPD_SCHEMA: schema, STEPD_LOG_LEVEL: 'warn' }),
      timeout: 90_000,
    });
    const outcome = JSON.parse(stdout.trim().split('\n').pop()!) as { status: string; output: { charge: { pid: number; chargeId: string; cents: number }; receipt: string; carrier: string } };
    expect(outcome.status).toBe('completed');
    expect(outcome.output.charge.cents).toBe(1200);
    expect(outcome.output.receipt).toBe(`receipt for ${outcome.output.charge.chargeId} to ada@example.com`);
    expect(outcome.output.carrier).toBe('post');
    // The tool ran in the app's process, and its step was run by the app's executor.
    const { rows } = await admin.query<{ result: { pid: number }; executor_id: string }>(
      `SELECT result, executor_id FROM ${schema}.workflow_steps WHERE tool = 'billing.charge' AND status = 'done'`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.result.pid).toBe(outcome.output.charge.pid);
    expect(rows[0]!.executor_id).toMatch(new RegExp(`-${outcome.output.charge.pid}$`));
  });

  it('type-checks a user\'s TypeScript against the declarations: args are typed from the zod schema', async () => {
    await writeFile(
      path.join(project.dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2023', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, types: ['node'] }, include: ['app.ts'] }),
    );
    await writeFile(
      path.join(project.dir, 'app.ts'),
      `import { startStepd, defineTool, type WorkflowOutcome } from 'stepd';
import { createWorker } from 'stepd/worker';
import { z } from 'zod';

const charge = defineTool({
  input: z.object({ cents: z.number() }),
  run: async ({ cents }, ctx) => ({ cents: cents + 1, key: ctx.idempotencyKey }),
});
// @ts-expect-error cents is a number
defineTool({ input: z.object({ cents: z.number() }), run: async ({ cents }) => cents.toUpperCase() });

export async function main(): Promise<WorkflowOutcome<{ cents: number }>> {
  const stepd = await startStepd({
    databaseUrl: 'postgres://x',
    tools: {
      'billing.charge': charge,
      'billing.refund': { input: z.object({ cents: z.number() }), run: async ({ cents }) => cents.toFixed(0) },
      // @ts-expect-error inline tools are typed from their schema too: cents is a number
      'billing.void': { input: z.object({ cents: z.number() }), run: async ({ cents }) => cents.toUpperCase() },
    },
  });
  const { workflowId } = await stepd.startWorkflow({ name: 'n', flow: {}, input: { a: 1 } });
  await stepd.sendSignal({ name: 's', key: 'k', payload: { amount: 1 } });
  const outcome = await stepd.waitForWorkflow<{ cents: number }>(workflowId, { timeoutMs: 10 });
  if (outcome.status === 'completed') outcome.output.cents.toFixed();
  await stepd.stop({ graceMs: 0 });
  const worker = createWorker({
    databaseUrl: 'postgres://x',
    concurrency: 2,
    tools: {
      'billing.charge': charge,
      // @ts-expect-error typed from the schema: amount is a string
      'billing.note': { input: z.object({ amount: z.string() }), run: ({ amount }) => amount.toFixed() },
    },
  });
  await worker.stop();
  return outcome;
}
`,
    );
    const tsc = path.join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
    const result = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project.dir, timeout: 120_000 }).then(
      () => '',
      (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
    );
    expect(result).toBe('');
  });
});
