/**
 * The stepd executor under test, in its own process with its default settings:
 *   node dist/src/cli.js start --database-url URL --schema S --executor-id bench
 * It runs in an empty working folder (so no stepd.config.json is picked up unless given) and without the
 * STEPD_* variables that would change its settings; only the log level is lowered.
 * Its CPU time and peak memory are read from /proc.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cleanup } from './pg.js';
import { clockTicksPerSecond, processCpuSeconds } from './procCpu.js';

/** dist/src/cli.js, found from this compiled file (dist/scripts/bench/). */
export function cliPath(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli.js');
}

const SETTING_VARS = /^(STEPD_|DATABASE_URL$)/;

export class ExecutorProcess {
  private readonly child: ChildProcess;
  private readonly stderrTail: string[] = [];
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly exited: Promise<void>;
  private readonly workDir: string;
  private readonly removeCleanup: () => Promise<void>;
  private readonly killOnExit: () => void;
  /** Where its /metrics answers, when started with one. */
  readonly httpPort: number | undefined;
  private readonly ticks = clockTicksPerSecond();

  /**
   * `profileDir`: run the executor under `node --cpu-prof` (a diagnostic; it slows the executor).
   * `concurrency`: pass --concurrency (else the default). `cli`: another build's dist/src/cli.js.
   * `config`: written to stepd.config.json in its working folder (else it has none).
   * `httpPort`: serve /metrics there (--http), for the accounting.
   */
  constructor(opts: { url: string; schema: string; cleanup: Cleanup; profileDir?: string; concurrency?: number; cli?: string; executorId?: string; config?: unknown; httpPort?: number }) {
    this.workDir = mkdtempSync(path.join(os.tmpdir(), 'stepd-bench-'));
    if (opts.config !== undefined) writeFileSync(path.join(this.workDir, 'stepd.config.json'), JSON.stringify(opts.config));
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!SETTING_VARS.test(k)) env[k] = v;
    env.STEPD_LOG_LEVEL = 'warn';
    const profile = opts.profileDir ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(opts.profileDir)] : [];
    this.child = spawn(
      process.execPath,
      [
        ...profile, opts.cli ?? cliPath(), 'start', '--database-url', opts.url, '--schema', opts.schema, '--executor-id', opts.executorId ?? 'bench',
        ...(opts.concurrency !== undefined ? ['--concurrency', String(opts.concurrency)] : []),
        ...(opts.httpPort !== undefined ? ['--http', String(opts.httpPort)] : []),
      ],
      { cwd: this.workDir, env, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) if (line.trim()) this.stderrTail.push(line);
      if (this.stderrTail.length > 40) this.stderrTail.splice(0, this.stderrTail.length - 40);
    });
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      }),
    );
    // Never leave the executor behind, whatever happens to the harness.
    this.killOnExit = () => {
      if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    };
    process.once('exit', this.killOnExit);
    if (opts.httpPort !== undefined) this.httpPort = opts.httpPort;
    this.removeCleanup = opts.cleanup.add(`stop executor ${this.child.pid}`, () => this.stop());
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Throws, with the executor's last log lines, if the process has died. */
  assertAlive(): void {
    if (this.exit) {
      throw new Error(
        `the executor exited (code ${this.exit.code}, signal ${this.exit.signal}); its last log lines:\n${this.stderrTail.join('\n')}`,
      );
    }
  }

  /** Warnings and errors the executor logged (it runs at level warn). */
  get logTail(): string[] {
    return [...this.stderrTail];
  }

  /** User + system CPU seconds the process has used so far. */
  cpuSeconds(): number {
    return processCpuSeconds(this.pid, this.ticks) ?? Number.NaN;
  }

  /**
   * Write system calls the process has made so far (/proc/PID/io syscw). At log level warn the
   * executor writes almost only to its PostgreSQL sockets, one write per query or pipelined
   * batch, so the delta over a scenario approximates its database round trips.
   */
  writeSyscalls(): number {
    const io = readFileSync(`/proc/${this.pid}/io`, 'utf8');
    return Number(/^syscw:\s+(\d+)/m.exec(io)?.[1] ?? Number.NaN);
  }

  /** Peak and current resident set size, in MiB (VmHWM and VmRSS of /proc/PID/status). */
  memory(): { peakRssMiB: number; rssMiB: number } {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
    return { peakRssMiB: kib('VmHWM') / 1024, rssMiB: kib('VmRSS') / 1024 };
  }

  /**
   * Starts the peak RSS (VmHWM) over from the current RSS (Linux: `echo 5 > /proc/PID/clear_refs`),
   * so a later memory() reads the peak of what ran since. False where that is not possible.
   */
  resetPeakRss(): boolean {
    try {
      writeFileSync(`/proc/${this.pid}/clear_refs`, '5');
      return true;
    } catch {
      return false;
    }
  }

  /** Graceful stop (SIGTERM); SIGKILL if it has not exited after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.exit) {
      this.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        this.exited.then(() => false),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs))),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
    }
    process.off('exit', this.killOnExit);
    rmSync(this.workDir, { recursive: true, force: true });
  }

  /** Stops the process and takes it off the cleanup list. */
  async close(): Promise<void> {
    await this.removeCleanup();
  }
}
