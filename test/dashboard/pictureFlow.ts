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
