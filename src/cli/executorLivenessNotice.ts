/**
 * `stepd run --follow` and `stepd watch` say when no executor is alive on the schema (none beat
 * within its dead-after: no daemon runs, or it died), instead of waiting in silence, and say so
 * again when one comes back. A role that may not read the executors table is told nothing.
 */
import { readExecutorLivenessByBeat } from '../db/queries/liveExecutors.js';
import type { Queryable } from '../db/queries/common.js';
import { isConnectionError } from './common.js';

export class ExecutorLivenessNotice {
  private state: 'unknown' | 'alive' | 'none' | 'unreadable' = 'unknown';

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
    private readonly say: (line: string) => void,
  ) {}

  /** Reads the executors' beats; says something only when the answer changed. */
  async check(what: string): Promise<void> {
    if (this.state === 'unreadable') return;
    let alive: number;
    let lastBeatAt: Date | null;
    try {
      ({ alive, lastBeatAt } = await readExecutorLivenessByBeat(this.db));
    } catch (err) {
      if (isConnectionError(err)) return;
      // No SELECT on executors (an older schema, or a role without the grant): nothing to say.
      this.state = 'unreadable';
      return;
    }
    if (alive > 0) {
      if (this.state === 'none') this.say(`stepd: an executor is alive again on schema ${this.schema}; ${what} goes on`);
      this.state = 'alive';
      return;
    }
    if (this.state === 'none') return;
    this.state = 'none';
    const last = lastBeatAt ? `the last heartbeat was at ${lastBeatAt.toISOString()}` : 'no executor has a heartbeat';
    this.say(`stepd: no executor is alive on schema ${this.schema} (${last}): ${what} waits until one runs; start one with: stepd start`);
  }
}
