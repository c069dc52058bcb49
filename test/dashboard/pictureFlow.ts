import { envFor, spawnCli, type CliProcess } from '../cli/helpers.js';
import { insertWorkflow, waitForStep, type TestSchema } from '../helpers/db.js';

/**
 * A flow for the dashboard's pictures (the browser test and the docs' screenshot): prepare (done)
 * → fan: slow (running a long sleep) ∥ flaky (failed twice, retried) → recover (its onError, done);
 * publish, the join, not reached while slow runs.
 */
export const pictureFlow = {
  start: 'prepare',
  steps: {
    prepare: { tool: 'core.echo', args: { batch: 7 }, next: 'fan' },
    fan: { parallel: ['slow', 'flaky'], join: 'publish' },
    slow: { tool: 'core.sleep', args: { ms: 600_000 }, timeout: '20m' },
    flaky: {
      tool: 'core.fail',
      args: { code: 'http_503', message: 'inventory.example.com answered 503', retryable: true },
      retry: { maxAttempts: 2, initial: 300, jitter: false },
      onError: 'recover',
    },
    recover: { tool: 'core.echo', args: { fallback: 'cached inventory' } },
    publish: { tool: 'core.echo', args: { published: true }, done: true },
  },
};

/** A daemon with the dashboard on a free port and a workflow of pictureFlow at the moment the pictures show: slow running, flaky failed twice, recover done. */
export async function startPictureWorkflow(t: TestSchema): Promise<{ daemon: CliProcess; base: string; id: string }> {
  const daemon = spawnCli(['start', '--http', '0', '--user', 'dana'], { env: envFor(t) });
  const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
  const id = await insertWorkflow(t, pictureFlow, {}, { name: 'inventory-sync', user: 'dana' });
  await waitForStep(t, id, 'recover', 'done');
  await waitForStep(t, id, 'slow', 'running');
  return { daemon, base, id };
}
