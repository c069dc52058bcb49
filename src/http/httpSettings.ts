/**
 * `stepd start`'s HTTP flags and environment → where to listen and who loopback requests act as.
 * Flags win over the environment: --http / STEPD_HTTP (a port; 0 lets the kernel pick one),
 * --http-host / STEPD_HTTP_HOST (default 127.0.0.1), --user / STEPD_USER (default the OS user).
 */
import os from 'node:os';
import { ConfigError } from '../errors.js';

export const DEFAULT_HTTP_HOST = '127.0.0.1';

export interface HttpFlags {
  http?: string;
  httpHost?: string;
  user?: string;
}

export interface HttpSettings {
  port: number;
  host: string;
  localUser: string;
}

/** Undefined when no port is asked for (the daemon then serves no HTTP). */
export function httpSettingsFrom(flags: HttpFlags, env: NodeJS.ProcessEnv = process.env): HttpSettings | undefined {
  const portText = (flags.http ?? env.STEPD_HTTP ?? '').trim();
  if (!portText) return undefined;
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65_535) {
    throw new ConfigError('invalid settings', [{ path: 'http', message: `must be a port number from 0 to 65535 (got ${JSON.stringify(portText)})` }]);
  }
  const host = (flags.httpHost ?? env.STEPD_HTTP_HOST ?? '').trim() || DEFAULT_HTTP_HOST;
  return { port, host, localUser: (flags.user ?? env.STEPD_USER ?? '').trim() || osUser() };
}

function osUser(): string {
  try {
    return os.userInfo().username || 'stepd';
  } catch {
    return process.env.USER || 'stepd';
  }
}
