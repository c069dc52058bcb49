/**
 * A bench worker process (scenario 6b): the worker SDK serving `bench.sleep`, a tool that waits
 * `ms` (20 by default), as a user's worker would. Started by workerScenario.ts as
 *   node dist/scripts/bench/workerProcess.js
 * with BENCH_WORKER_URL, BENCH_WORKER_SCHEMA, BENCH_WORKER_CONCURRENCY (and BENCH_WORKER_PREFETCH); prints "ready" once
 * its first take got through, and stops gracefully on SIGTERM.
 */
import { createWorker } from '../../src/worker/index.js';

const env = process.env;
const worker = createWorker({
  databaseUrl: env.BENCH_WORKER_URL!,
  schema: env.BENCH_WORKER_SCHEMA!,
  concurrency: Number(env.BENCH_WORKER_CONCURRENCY ?? 8),
  // Tasks taken ahead: as many as run at once, the setting for short tools (docs/workers.md; the
  // SDK's default is a quarter); BENCH_WORKER_PREFETCH overrides it.
  prefetch: Number(env.BENCH_WORKER_PREFETCH ?? env.BENCH_WORKER_CONCURRENCY ?? 8),
  handleSignals: true,
  shutdownGraceMs: 5_000,
  tools: {
    'bench.sleep': {
      run: (args: { ms?: number }, ctx) =>
        new Promise((resolve, reject) => {
          const ms = typeof args?.ms === 'number' ? args.ms : 20;
          const timer = setTimeout(() => resolve({ slept: ms }), ms);
          ctx.signal.addEventListener('abort', () => (clearTimeout(timer), reject(ctx.signal.reason)), { once: true });
        }),
    },
  },
});
await worker.ready;
process.stdout.write('ready\n');
