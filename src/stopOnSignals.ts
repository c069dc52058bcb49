/**
 * The two-stage stop on process signals shared by the daemon, the library and the worker: the
 * first SIGINT/SIGTERM starts a graceful `stop()`, a second exits at once (130). An error while
 * stopping is logged and sets the exit code; `onStopped` runs once the stop has ended either way.
 */
export interface SignalLog {
  info: (o: object, m: string) => void;
  error: (o: object, m: string) => void;
}

export function stopOnSignals(stop: () => Promise<void>, log: SignalLog, what = 'stopping', onStopped: () => void = () => undefined): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.info({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    log.info({ signal }, `${what} (send the signal again to exit at once)`);
    stop().then(onStopped, (err: unknown) => {
      log.error({ err }, 'error while stopping');
      process.exitCode = 1;
      onStopped();
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
