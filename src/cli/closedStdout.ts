/**
 * `stepd list | head -1`: once the reader closes the pipe, writing to stdout fails with EPIPE,
 * which Node reports as an unhandled 'error' event (a stack trace). The reader has what it wanted,
 * so a command ends quietly with status 0. The daemon (`stepd start`) is the exception: it must
 * still stop its executor and embedded PostgreSQL cleanly, so it only stops writing to stdout.
 */
export interface ClosedStdoutOptions {
  /** Keep running when stdout closes (the daemon); default: exit(0). */
  keepRunning: boolean;
  exit?: (code: number) => void;
}

export function handleClosedStdout(stream: NodeJS.WriteStream, opts: ClosedStdoutOptions): void {
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    if (!opts.keepRunning) exit(0);
    // Further writes to a destroyed stream are dropped silently; nothing more to do.
  });
}
