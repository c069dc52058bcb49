/**
 * docs/workers.md's workers run as written: the plain-SQL worker in its psql loop and the Python
 * (psycopg2) worker, both as real processes connected as a role granted `<schema>_worker`. The
 * only change made to the code blocks: the schema `stepd.` becomes the test's schema.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { docsBlock, PYTHON, startPgbouncer, startProc, workerRole, type Proc } from './workerHelpers.js';

/** Writes the docs' psql worker and loop into a folder and starts the loop (sh) as written. */
export function startDocsPsqlWorker(t: TestSchema, url: string): Proc {
  const dir = tempDirSync('stepd-psqlworker-');
  writeFileSync(path.join(dir, 'billing-worker.sql'), docsBlock('billing-worker.sql').replaceAll('stepd.', `${t.schema}.`));
  return startProc('sh', ['-c', docsBlock('psql-loop.sh')], { cwd: dir, env: { STEPD_WORKER_URL: url } });
}

/** Writes the docs' Python worker into a folder and runs it as written. */
export function startDocsPythonWorker(t: TestSchema, url: string): Proc {
  const dir = tempDirSync('stepd-docsworker-');
  const file = path.join(dir, 'billing_worker.py');
  writeFileSync(file, docsBlock('billing_worker.py').replaceAll('stepd.', `${t.schema}.`));
  return startProc(PYTHON, [file], { cwd: dir, env: { STEPD_WORKER_URL: url } });
}

const TOTAL = { start: 't', steps: { t: { tool: 'billing.total', args: { amounts: '{{input.amounts}}' }, done: true, output: '{{result}}' } } };
const CHARGE = {
  start: 'c',
  steps: {
    c: { tool: 'billing.charge', args: { order: '{{input.order}}', amount: '{{input.amount}}' }, next: 'r' },
    r: { tool: 'core.echo', args: { receipt: '{{steps.c.result.id}}' }, done: true, output: '{{result}}' },
  },
};

async function runBoth(t: TestSchema, url: string): Promise<void> {
  const psql = startDocsPsqlWorker(t, url);
  const python = startDocsPythonWorker(t, url);
  const total = await insertWorkflow(t, TOTAL, { amounts: [12.5, 30] });
  const charges = await Promise.all([1, 2, 3].map((n) => insertWorkflow(t, CHARGE, { order: `O-${n}`, amount: n })));
  const wf = await waitForWorkflow(t, total, undefined, 30_000).catch((err) => {
    throw new Error(`${(err as Error).message}; psql: ${psql.output()}`);
  });
  expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
  expect(wf.output).toEqual({ total: 42.5 });
  for (const [i, id] of charges.entries()) {
    const c = await waitForWorkflow(t, id, undefined, 30_000).catch((err) => {
      throw new Error(`${(err as Error).message}; python: ${python.output()}`);
    });
    expect(c.status, JSON.stringify(c.error)).toBe('completed');
    expect(c.output).toEqual({ receipt: `ch_O-${i + 1}` });
  }
}

describe('the workers of docs/workers.md, as written', () => {
  it('the psql worker and the Python worker serve their tools', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const { url } = await workerRole(t);
    await runBoth(t, url);
  });

  it('both work through PgBouncer in transaction mode', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const { role } = await workerRole(t);
    const { url } = await startPgbouncer(role, new URL(t.url).pathname.slice(1));
    await runBoth(t, url);
  });
});
