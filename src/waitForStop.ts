/**
 * How the daemon reacts to SIGINT/SIGTERM. The first signal starts a graceful stop (stop claiming,
 * wait for running steps, stop the embedded PostgreSQL). A Ctrl-C in a terminal reaches every
 * process of the foreground group — `npm`, the shell npx runs, and the daemon — and npm then
 * forwards its own copy to the daemon, so one key press arrives twice within milliseconds. A
 * SIGINT within `duplicateWindowMs` of a first SIGINT is therefore taken as that duplicate and
 * ignored. A second SIGTERM is always deliberate (a supervisor's, or a person's `kill`): it exits.
 * A deliberate second signal later means "exit now": the running steps are abandoned (the next
 * start re-runs them), but the embedded PostgreSQL is still stopped before the process exits, so
 * nothing is left running behind the terminal.
 */
export interface StopLog {
  info: (o: object, m: string) => void;
  error: (o: object, m: string) => void;
}

export interface WaitForStopOptions {
  /** The graceful stop. */
  stop: () => Promise<void>;
  /** Run on a deliberate second signal before exiting (stops the embedded PostgreSQL); bounded by `abortTimeoutMs`. */
  abort?: () => Promise<void>;
  log: StopLog;
  /** Runs once the handlers are installed (the ready line). */
  listening?: () => void;
  /** A second SIGINT this soon after a first SIGINT is the duplicate of a Ctrl-C (default 1500 ms). */
  duplicateWindowMs?: number;
  abortTimeoutMs?: number;
  exit?: (code: number) => void;
  now?: () => number;
  signals?: Pick<NodeJS.Process, 'on' | 'off'>;
}

export const DUPLICATE_SIGNAL_WINDOW_MS = 1500;

export function waitForStop(opts: WaitForStopOptions): Promise<void> {
  const { log } = opts;
  const now = opts.now ?? Date.now;
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  const window = opts.duplicateWindowMs ?? DUPLICATE_SIGNAL_WINDOW_MS;
  const target = opts.signals ?? process;
  return new Promise((resolve) => {
    let firstAt: number | undefined;
    let firstSignal: NodeJS.Signals | undefined;
    let aborting = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (firstAt === undefined) {
        firstAt = now();
        firstSignal = signal;
        log.info({ signal }, 'stopping (send the signal again to exit at once)');
        opts.stop().then(
          () => resolve(),
          (err: unknown) => {
            log.error({ err }, 'error while stopping');
            process.exitCode = 1;
            resolve();
          },
        );
        return;
      }
      if (signal === 'SIGINT' && firstSignal === 'SIGINT' && now() - firstAt < window) {
        log.info({ signal }, 'ignoring a duplicate signal (a Ctrl-C reaches both npm and the daemon); already stopping');
        return;
      }
      if (aborting) return;
      aborting = true;
      log.info({ signal }, 'second signal: exiting now');
      const timeoutMs = opts.abortTimeoutMs ?? 10_000;
      let timer: NodeJS.Timeout | undefined;
      const bounded = new Promise<void>((done) => {
        timer = setTimeout(() => {
          log.error({ timeoutMs }, 'the embedded PostgreSQL did not stop in time; exiting anyway');
          done();
        }, timeoutMs);
      });
      const aborted = (opts.abort?.() ?? Promise.resolve()).catch((err: unknown) => log.error({ err }, 'could not stop the embedded PostgreSQL'));
      void Promise.race([aborted, bounded]).then(() => {
        clearTimeout(timer);
        exit(130);
      });
    };
    target.on('SIGINT', onSignal);
    target.on('SIGTERM', onSignal);
    opts.listening?.();
  });
}
