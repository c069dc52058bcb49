/** Where the figures came from: PostgreSQL settings, the machine, Node.js, the commit. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';

export interface BenchEnvironment {
  date: string;
  node: string;
  commit: string | null;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; kernel: string };
  postgres: Record<string, string>;
}

const PG_SETTINGS = ['server_version', 'synchronous_commit', 'fsync', 'shared_buffers', 'max_connections', 'work_mem', 'wal_level', 'jit'];

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  } catch {
    return os.cpus()[0]?.model ?? 'unknown';
  }
}

function nproc(): number {
  try {
    return Number(execFileSync('nproc', { encoding: 'utf8' }).trim());
  } catch {
    return os.availableParallelism();
  }
}

function gitCommit(): string | null {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return dirty ? `${sha}+uncommitted` : sha;
  } catch {
    return null;
  }
}

export async function describeEnvironment(url: string): Promise<BenchEnvironment> {
  const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench' });
  await client.connect();
  const postgres: Record<string, string> = {};
  try {
    for (const name of PG_SETTINGS) {
      const r = await client.query<Record<string, string>>(`SHOW ${name}`);
      postgres[name] = Object.values(r.rows[0]!)[0]!;
    }
  } finally {
    await client.end();
  }
  return {
    date: new Date().toISOString(),
    node: process.version,
    commit: gitCommit(),
    machine: { cpus: nproc(), cpuModel: cpuModel(), memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10, kernel: os.release() },
    postgres,
  };
}
