/** The OS user PostgreSQL runs as when stepd runs as root, and whether it can reach the files it needs. */
import * as fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { ConfigError } from '../../errors.js';

const DEFAULT_OS_USER = 'nobody';

export interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * Who PostgreSQL runs as. Not root: ourselves (undefined). Root: the owner of an existing cluster,
 * else `osUser` (default nobody).
 */
export async function serverUser(dataDir: string, pgdata: string, osUser: string | undefined, log: Logger): Promise<OsUser | undefined> {
  const stat = await fs.stat(pgdata).catch(() => undefined);
  const uid = process.getuid?.();
  if (uid !== 0) {
    if (stat && uid !== undefined && stat.uid !== uid) {
      throw new ConfigError(`${pgdata} belongs to uid ${stat.uid}, but stepd runs as uid ${uid}. Run stepd as that user (or as root), or choose another data directory.`);
    }
    return undefined;
  }
  if (stat) {
    if (stat.uid === 0) {
      throw new ConfigError(
        `${pgdata} belongs to root, but PostgreSQL refuses to run as root. Give it to an unprivileged user (chown -R ${DEFAULT_OS_USER} ${pgdata}) ` +
          'or delete it to start from an empty database.',
      );
    }
    const owner = await lookupUser((u) => u.uid === stat.uid);
    if (!owner) throw new ConfigError(`${pgdata} belongs to uid ${stat.uid}, which has no entry in /etc/passwd; PostgreSQL needs one. Create that user or chown the directory.`);
    if (osUser !== undefined && osUser !== owner.name) {
      log.warn({ dataDir, osUser, owner: owner.name }, 'the existing cluster belongs to another OS user; running PostgreSQL as its owner');
    }
    return owner;
  }
  const name = osUser ?? DEFAULT_OS_USER;
  const user = await lookupUser((u) => u.name === name);
  if (!user) {
    throw new ConfigError(
      `stepd runs as root, and PostgreSQL refuses to, so it runs PostgreSQL as the OS user '${name}', which does not exist. ` +
        `Create it (useradd --system --no-create-home ${name}), choose another user, or run stepd as an ordinary user.`,
    );
  }
  if (user.uid === 0) throw new ConfigError(`The OS user '${name}' has uid 0; PostgreSQL needs an unprivileged user.`);
  return user;
}

export async function lookupUser(match: (u: OsUser) => boolean): Promise<OsUser | undefined> {
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid] = line.split(':');
    if (name === undefined || uid === undefined || gid === undefined) continue;
    const user = { name, uid: Number(uid), gid: Number(gid) };
    if (Number.isInteger(user.uid) && Number.isInteger(user.gid) && match(user)) return user;
  }
  return undefined;
}

/** The server user must reach the cluster and the log file inside dataDir: allow others to traverse it (not to list it). */
export async function letUserTraverse(dataDir: string, user: OsUser, log: Logger): Promise<void> {
  const stat = await fs.stat(dataDir);
  if (!canTraverse(stat, user)) {
    await fs.chmod(dataDir, (stat.mode & 0o7777) | 0o001);
    log.info({ dataDir, osUser: user.name }, 'let the PostgreSQL OS user traverse the data directory (chmod o+x)');
  }
}

export function canTraverse(stat: { uid: number; gid: number; mode: number }, user: OsUser): boolean {
  if (stat.uid === user.uid) return (stat.mode & 0o100) !== 0;
  if (stat.gid === user.gid) return (stat.mode & 0o010) !== 0;
  return (stat.mode & 0o001) !== 0;
}

/** The first directory on the way to `target` that `user` may not enter, judged by mode bits. */
export async function blockingDirectory(target: string, user: OsUser): Promise<string | undefined> {
  const dirs: string[] = [];
  for (let dir = path.dirname(target); ; dir = path.dirname(dir)) {
    dirs.unshift(dir);
    if (dir === path.dirname(dir)) break;
  }
  for (const dir of dirs) {
    const stat = await fs.stat(dir).catch(() => undefined);
    if (stat && !canTraverse(stat, user)) return dir;
  }
  return undefined;
}
