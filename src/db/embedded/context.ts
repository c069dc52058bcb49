/** What the steps of bringing up one folder's server share: paths, binaries, the OS user, the log. */
import type { Logger } from 'pino';
import type { OsUser } from './osUser.js';

export interface Binaries {
  postgres: string;
  pg_ctl: string;
  initdb: string;
}

export interface Context {
  dataDir: string;
  pgdata: string;
  database: string;
  /** Set when we run as root and PostgreSQL has to run as someone else. */
  runAs: OsUser | undefined;
  bins: Binaries;
  startTimeoutMs: number;
  log: Logger;
}
