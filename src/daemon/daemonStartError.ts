/**
 * Why the daemon did not start, for whoever started it to word (`stepd start` turns it into its
 * messages and exit codes, src/cli/start.ts): the embedded PostgreSQL in `where` (a folder) did
 * not start, or something failed once the database at `where` (a URL) was known; what had
 * started is stopped by then. `cause` is the original error.
 */
export class DaemonStartError extends Error {
  constructor(
    readonly stage: 'embedded' | 'services',
    readonly where: string,
    override readonly cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
    this.name = 'DaemonStartError';
  }
}
