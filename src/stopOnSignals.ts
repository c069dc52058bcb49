/**
 * The two-stage stop on process signals for the library and the worker, the same as the daemon's
 * (waitForStop.ts): the first SIGINT/SIGTERM starts a graceful `stop()`, a duplicate within a
 * moment (one Ctrl-C reaching a process and its parent) is ignored, a later second one exits at
 * once (130). An error while stopping is logged and sets the exit code; `onStopped` runs once the
 * stop has ended either way.
 */
import { waitForStop, type StopLog } from './waitForStop.js';

export type SignalLog = StopLog;

export function stopOnSignals(stop: () => Promise<void>, log: SignalLog, onStopped: () => void = () => undefined): void {
  void waitForStop({ stop, log }).then(onStopped);
}
