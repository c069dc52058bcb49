/** Who the caller is when nothing authenticates them (stdio, the CLI): --user, else STEPD_USER, else the OS user. */
import os from 'node:os';

export function callerUser(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const named = flag?.trim() || env.STEPD_USER?.trim();
  if (named) return named;
  try {
    return os.userInfo().username || env.USER || undefined;
  } catch {
    return env.USER || undefined;
  }
}
