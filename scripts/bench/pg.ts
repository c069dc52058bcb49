/**
 * Database helpers of the harness: plain client connections (the harness drives stepd like any
 * other service), executor-role connections where a scenario must write behind the guard, fresh
 * schemas that are always dropped, and waiting on a condition by polling.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export type Row = Record<string, unknown>;

/** Things to undo at the end, last registered first, even when the run fails or is interrupted. */
export class Cleanup {
  private readonly steps: { what: string; fn: () => Promise<void> }[] = [];
  private started = false;

  /** True once runAll() has begun (the run was interrupted or is over): stop starting work. */
  get closing(): boolean {
    return this.started;
  }

  /** Registers `fn`; the returned function runs it now (once) and takes it off the list. */
  add(what: string, fn: () => Promise<void>): () => Promise<void> {
    const step = { what, fn };
    this.steps.push(step);
    return async () => {
      const i = this.steps.indexOf(step);
      if (i < 0) return; // runAll() has done it already
      this.steps.splice(i, 1);
      await fn();
    };
  }

  async runAll(): Promise<void> {
    this.started = true;
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await step.fn();
      } catch (err) {
        process.stderr.write(`bench: cleanup "${step.what}" failed: ${(err as Error).message}\n`);
      }
    }
  }
}

export function clientPool(url: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, application_name: 'stepd-bench' });
  pool.on('error', () => {});
  return pool;
}

/**
 * A connection marked like the executor's own (`stepd.executor=on`): the guard trigger lets its
 * writes through. Used only to bulk-load finished rows and to time the claim statement.
 */
export async function executorRoleClient(url: string, schema: string): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: url,
    options: `-c search_path=${schema},public -c stepd.executor=on`,
    application_name: 'stepd-bench-executor-role',
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

export function newSchemaName(label: string): string {
  return `bench_${randomBytes(4).toString('hex')}_${label}`;
}

/**
 * Registers the schema's DROP with `cleanup` and returns a function that drops it now, with what
 * a stepd migration creates beside it: pg-boss's `<schema>_boss` and the `<schema>_executor` and
 * `<schema>_client` and `<schema>_worker` roles (each dropped if it exists; a role still referenced elsewhere stays).
 */
export function dropSchemaLater(cleanup: Cleanup, url: string, schema: string): () => Promise<void> {
  return cleanup.add(`drop schema ${schema}`, async () => {
    const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench-cleanup' });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${client.escapeIdentifier(schema)} CASCADE`);
      await client.query(`DROP SCHEMA IF EXISTS ${client.escapeIdentifier(`${schema}_boss`)} CASCADE`);
      for (const role of [`${schema}_executor`, `${schema}_client`, `${schema}_worker`]) {
        await client.query(`DROP ROLE IF EXISTS ${client.escapeIdentifier(role)}`).catch(() => {});
      }
    } finally {
      await client.end();
    }
  });
}

export class TimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`timed out after ${ms} ms waiting for ${what}`);
    this.name = 'TimeoutError';
  }
}

/** Polls `check` every `intervalMs` until it returns something truthy. */
export async function pollUntil<T>(
  check: () => Promise<T>,
  opts: { what: string; intervalMs: number; timeoutMs: number },
): Promise<NonNullable<T>> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new TimeoutError(opts.what, opts.timeoutMs);
    await sleep(opts.intervalMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Milliseconds between two timestamps, computed by PostgreSQL (microsecond precision). */
export const MS_BETWEEN = (from: string, to: string) => `(extract(epoch FROM (${to}) - (${from})) * 1000)::float8`;
