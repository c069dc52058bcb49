/**
 * Debian's PgBouncer (/usr/sbin/pgbouncer) in front of the test database, on a free port, with
 * its own ini in a temp folder: transaction pooling, trust auth for the given roles. As root it
 * runs as `nobody` (PgBouncer refuses to run as root). Stopped after the test.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { onCleanup, TEST_DATABASE_URL, waitFor } from './db.js';
import { tempDirSync } from './isolation.js';
import { freePort } from './ports.js';

export const PGBOUNCER = '/usr/sbin/pgbouncer';

export interface RunningPgBouncer {
  port: number;
  /** The URL of `role` through the pooler (same database as the tests). */
  urlFor(role: string): string;
}

export async function startPgBouncer(opts: { roles: string[]; poolMode?: 'transaction' | 'session'; poolSize?: number }): Promise<RunningPgBouncer> {
  if (!existsSync(PGBOUNCER)) throw new Error(`${PGBOUNCER} is missing: apt-get install pgbouncer`);
  const db = new URL(TEST_DATABASE_URL);
  const database = db.pathname.slice(1);
  const dir = tempDirSync('stepd-pgbouncer-');
  const port = await freePort();
  const ini = path.join(dir, 'pgbouncer.ini');
  const users = path.join(dir, 'users.txt');
  await writeFile(users, opts.roles.map((r) => `"${r}" ""`).join('\n') + '\n');
  await writeFile(
    ini,
    [
      '[databases]',
      `${database} = host=${db.hostname} port=${db.port || 5432} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${users}`,
      `pool_mode = ${opts.poolMode ?? 'transaction'}`,
      'max_client_conn = 500',
      `default_pool_size = ${opts.poolSize ?? 8}`,
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  const child = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'nobody'] : []), ini], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout!.on('data', (c: Buffer) => (log += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (log += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  onCleanup(async () => {
    child.kill('SIGTERM');
    await exited;
  });
  await waitFor(() => /listening on 127\.0\.0\.1/.test(log) || child.exitCode !== null, 'pgbouncer to listen', 10_000);
  if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${log}`);
  return { port, urlFor: (role) => `postgres://${encodeURIComponent(role)}@127.0.0.1:${port}/${database}` };
}
