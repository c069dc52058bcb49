/**
 * CPU time of a process on this machine, from /proc/PID/stat (user + system time). Used for the
 * executor process, the harness itself and the PostgreSQL backends that serve them.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second (getconf CLK_TCK; 100 where it cannot be read). */
export function clockTicksPerSecond(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/** User + system CPU seconds `pid` has used so far, or undefined once it has gone. */
export function processCpuSeconds(pid: number, ticksPerSecond: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}
