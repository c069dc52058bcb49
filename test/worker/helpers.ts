/**
 * Worker processes for the SDK's tests: `node fixtures/sdkWorker.mjs` on the built SDK
 * (dist/src/worker/index.js), connected as a LOGIN role granted `<schema>_worker` only. Their
 * JSON event lines are collected; every process is killed after the test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach } from 'vitest';
import { waitFor, type TestSchema } from '../helpers/db.js';
import { cleanEnv } from '../helpers/isolation.js';
import { createLoginRole } from '../security/helpers.js';

const SDK = fileURLToPath(new URL('../../dist/src/worker/index.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./fixtures/sdkWorker.mjs', import.meta.url));

export interface WorkerEvent {
  event: 'ready' | 'start' | 'aborted' | 'end';
  pid: number;
  at: number;
  stepId?: string;
  attempt?: number;
  key?: string;
  tool?: string;
  reason?: string;
  end?: string;
  listening?: boolean;
}

export interface WorkerProcess {
  child: ChildProcess;
  events: WorkerEvent[];
  output(): string;
  exited: Promise<number | null>;
  waitForEvent(match: (e: WorkerEvent) => boolean, what: string, timeoutMs?: number): Promise<WorkerEvent>;
}

const children = new Set<WorkerProcess>();
afterEach(async () => {
  const all = [...children];
  children.clear();
  for (const w of all) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  await Promise.all(all.map((w) => w.exited));
});
process.once('exit', () => {
  for (const w of children) w.child.kill('SIGKILL');
});

/** A LOGIN role that is a member of `<schema>_worker` and nothing else; its URL. */
export async function workerRoleUrl(t: TestSchema): Promise<string> {
  return (await createLoginRole(t, `${t.schema}_worker`, `wrk_${randomBytes(5).toString('hex')}`)).url;
}

/** Starts a worker process and waits for its `ready` line. `env`: WORKER_* settings (fixtures/sdkWorker.mjs). */
export async function spawnWorker(t: TestSchema, url: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
  if (!existsSync(SDK)) throw new Error(`${SDK} is missing: build first (sh scripts/node22.sh npx tsc -p tsconfig.json)`);
  const child = spawn(process.execPath, [FIXTURE], {
    env: cleanEnv({ DATABASE_URL: url, STEPD_SCHEMA: t.schema, STEPD_TEST_WORKER_MODULE: pathToFileURL(SDK).href, STEPD_LOG_LEVEL: 'warn', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: WorkerEvent[] = [];
  let out = '';
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    partial += chunk.toString();
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.trim()) events.push(JSON.parse(line) as WorkerEvent);
  });
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const w: WorkerProcess = {
    child,
    events,
    output: () => out,
    exited,
    waitForEvent: (match, what, timeoutMs = 30_000) => waitFor(() => events.find(match), `${what} (worker output: ${out.slice(-2000)})`, timeoutMs),
  };
  children.add(w);
  await w.waitForEvent((e) => e.event === 'ready', 'the worker to be ready');
  return w;
}
