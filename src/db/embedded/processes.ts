/** Processes and ports: the postmaster.pid file, whether a process is alive, whether a port is free. */
import * as fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { errCode, exists, realpathOr } from './helpers.js';

export interface PidFile {
  pid: number;
  port: number | undefined;
  /** 'starting', 'ready', 'stopping' or 'standby' once the postmaster has written it. */
  status: string | undefined;
}

/** postmaster.pid: pid, data directory, start time, port, socket dir, listen address, shmem key, status. */
export async function readPidFile(pgdata: string): Promise<PidFile | undefined> {
  const text = await fs.readFile(path.join(pgdata, 'postmaster.pid'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const lines = text.split('\n').map((l) => l.trim());
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const port = Number(lines[3]);
  return { pid, port: Number.isInteger(port) && port > 0 ? port : undefined, status: lines[7] || undefined };
}

/** 'gone' for a process that has exited, including a zombie its parent has not reaped yet. */
export async function processState(pid: number): Promise<'alive' | 'gone'> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X' ? 'gone' : 'alive';
  } catch (err) {
    if (errCode(err) === 'ENOENT' && (await exists('/proc/self/stat'))) return 'gone';
  }
  try {
    process.kill(pid, 0); // no /proc (macOS): signal 0 only checks that the process exists
    return 'alive';
  } catch (err) {
    return errCode(err) === 'EPERM' ? 'alive' : 'gone';
  }
}

/** When the process started (clock ticks since boot, field 22 of /proc/PID/stat), to tell it from a later one with the same pid; null without /proc. */
export async function processStartTime(pid: number): Promise<string | null> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return null;
  // Fields after the command name (which may hold spaces) start with the state, field 3.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}

/** Whether `pid` is the postmaster of `pgdata` (its command line names the data directory). Without /proc, assumes so. */
export async function isPostmasterFor(pid: number, pgdata: string): Promise<boolean> {
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return !(await exists('/proc/self/cmdline'));
  const args = cmdline.split('\0');
  const real = await realpathOr(pgdata);
  return args.some((arg) => arg === pgdata || arg === real);
}

export async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}
