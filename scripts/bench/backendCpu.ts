/**
 * CPU time of the PostgreSQL backends that serve one client process (the executor, or pg-boss in
 * this process): the server runs on this machine, so each backend's /proc/PID/stat is readable.
 * A backend is the client's when its `pg_stat_activity.client_port` is the local port of one of
 * the client's TCP sockets (/proc/CLIENT/fd and /proc/CLIENT/net/tcp{,6}); other sessions on
 * the server (other tests, the harness's own polling) are never counted. Backends are sampled
 * every `intervalMs` during the measurement, so one opened mid-way counts from its start (its
 * CPU since birth); one that closes between two samples loses what it used since the last.
 * The server's background processes (WAL writer, checkpointer, autovacuum) are not counted.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { clockTicksPerSecond, processCpuSeconds } from './procCpu.js';

/** Runs a read-only statement (the harness's pool or a client). */
export type ProbeQuery = (text: string, values: unknown[]) => Promise<{ rows: unknown[] }>;

export interface BackendCpu {
  /** CPU seconds the client's backends used during the measurement. */
  cpuSeconds: number;
  /** How many distinct backends served the client. */
  backends: number;
}

/** Local ports of `pid`'s TCP sockets (IPv4 and IPv6). */
export function localTcpPorts(pid: number): number[] {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9]!)) ports.push(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

export class BackendCpuProbe {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private readonly ticks = clockTicksPerSecond();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  /**
   * `clientPid`: the process whose backends count; `applicationName`: only backends of that
   * name (for a process with several kinds of connections, as this harness has).
   */
  constructor(private readonly opts: { query: ProbeQuery; clientPid: number; applicationName?: string; intervalMs?: number }) {}

  private startedAt = new Date();

  private async sampleOnce(): Promise<void> {
    const ports = localTcpPorts(this.opts.clientPid);
    if (ports.length === 0) return;
    const { rows } = await this.opts.query(
      `SELECT pid, backend_start >= $3::timestamptz AS fresh FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND client_port = ANY($1::int[])
          AND ($2::text IS NULL OR application_name = $2::text)`,
      [ports, this.opts.applicationName ?? null, this.startedAt],
    );
    for (const { pid, fresh } of rows as { pid: number; fresh: boolean }[]) {
      const cpu = processCpuSeconds(pid, this.ticks);
      if (cpu === undefined) continue;
      // A backend that began during the measurement counts from its start; an older one from now.
      if (!this.first.has(pid)) this.first.set(pid, fresh ? 0 : cpu);
      this.last.set(pid, cpu);
    }
  }

  /** Samples one after another, never two at once. */
  private sample(): Promise<void> {
    this.sampling = this.sampling.then(() => this.sampleOnce()).catch(() => {});
    return this.sampling;
  }

  async start(): Promise<void> {
    this.startedAt = new Date();
    await this.sample();
    this.timer = setInterval(() => void this.sample(), this.opts.intervalMs ?? 250);
  }

  async stop(): Promise<BackendCpu> {
    clearInterval(this.timer);
    await this.sample();
    let cpuSeconds = 0;
    for (const [pid, cpu] of this.last) cpuSeconds += cpu - (this.first.get(pid) ?? cpu);
    return { cpuSeconds, backends: this.last.size };
  }
}
