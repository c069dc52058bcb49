/**
 * One stepd daemon under test, a real process:
 *   node dist/src/cli.js start --database-url URL --schema S --executor-id ID --concurrency N
 * in its own temporary working folder holding the scenario's stepd.config.json, without the
 * STEPD_* variables of the caller. It can be killed with SIGKILL (the chaos) or stopped
 * gracefully; an exit nobody asked for is recorded (a daemon must survive everything here).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/src/cli.js, found from this compiled file (dist/scripts/chaos/). */
export function cliPath(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli.js');
}

const SETTING_VARS = /^(STEPD_|DATABASE_URL$)/;
const READY_TIMEOUT_MS = 60_000;

export interface DaemonOptions {
  url: string;
  schema: string;
  executorId: string;
  concurrency: number;
  /** Written as stepd.config.json in the daemon's working folder. */
  config: unknown;
}

export class DaemonError extends Error {
  readonly code = 'chaos_daemon';
  readonly retryable = false;
  constructor(message: string) {
    super(message);
    this.name = 'DaemonError';
  }
}

export class Daemon {
  readonly executorId: string;
  private readonly child: ChildProcess;
  private readonly workDir: string;
  private readonly logTail: string[] = [];
  private readonly exited: Promise<void>;
  private readonly killOnExit: () => void;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** Set before we kill or stop it: its exit is then expected. */
  private intended = false;

  constructor(opts: DaemonOptions) {
    this.executorId = opts.executorId;
    this.workDir = mkdtempSync(path.join(os.tmpdir(), 'stepd-chaos-'));
    writeFileSync(path.join(this.workDir, 'stepd.config.json'), JSON.stringify(opts.config, null, 2));
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!SETTING_VARS.test(k)) env[k] = v;
    env.STEPD_LOG_LEVEL = 'warn';
    this.child = spawn(
      process.execPath,
      [cliPath(), 'start', '--database-url', opts.url, '--schema', opts.schema, '--executor-id', opts.executorId, '--concurrency', String(opts.concurrency)],
      { cwd: this.workDir, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        for (const line of chunk.split('\n')) if (line.trim()) this.logTail.push(line);
        if (this.logTail.length > 60) this.logTail.splice(0, this.logTail.length - 60);
      });
    }
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      }),
    );
    this.killOnExit = () => {
      if (this.alive) this.child.kill('SIGKILL');
    };
    process.once('exit', this.killOnExit);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  /** True when the process exited although nobody killed or stopped it. */
  get diedOnItsOwn(): boolean {
    return this.exit !== undefined && !this.intended;
  }

  get exitDescription(): string {
    return this.exit ? `code ${this.exit.code}, signal ${this.exit.signal}` : 'running';
  }

  get lastLines(): string[] {
    return [...this.logTail];
  }

  /** Resolves once the daemon printed "stepd: ready"; throws with its log if it exits first. */
  async ready(): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!this.logTail.some((l) => l.startsWith('stepd: ready'))) {
      if (!this.alive) throw new DaemonError(`daemon ${this.executorId} exited before it was ready (${this.exitDescription}):\n${this.logTail.join('\n')}`);
      if (Date.now() > deadline) throw new DaemonError(`daemon ${this.executorId} not ready after ${READY_TIMEOUT_MS} ms:\n${this.logTail.join('\n')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL, waiting until the process is gone. */
  async kill(): Promise<void> {
    this.intended = true;
    if (this.alive) this.child.kill('SIGKILL');
    await this.exited;
    this.dispose();
  }

  /** SIGTERM (a graceful stop), SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    this.intended = true;
    if (this.alive) {
      this.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.exited, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
      if (this.alive) this.child.kill('SIGKILL');
      await this.exited;
    }
    this.dispose();
  }

  private dispose(): void {
    process.off('exit', this.killOnExit);
    rmSync(this.workDir, { recursive: true, force: true });
  }
}
