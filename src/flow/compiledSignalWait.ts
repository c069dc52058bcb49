/**
 * A signal wait as compiled (signalWait.ts reads it from the step's `signal`): the names it waits
 * for, its key template, since when signals count, and its timeout.
 */
export type SignalSince = 'workflow' | 'step';

export interface CompiledSignalWait {
  names: string[];
  /** The key template (absent: any key matches). */
  key?: string;
  since: SignalSince;
  timeoutMs?: number;
}
