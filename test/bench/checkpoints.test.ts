/**
 * The bench counts the PostgreSQL checkpoints that began during a scenario (a run that met one
 * reads slow): the count moves with a real checkpoint, and the report says in which runs.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { checkpointsSoFar } from '../../scripts/bench/checkpoints.js';
import { withResources } from '../../scripts/bench/machineLoad.js';
import { checkpointsIn } from '../../scripts/bench/report.js';
import { onCleanup, TEST_DATABASE_URL } from '../helpers/db.js';

async function connect(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL, application_name: 'stepd-test-checkpoints' });
  await c.connect();
  onCleanup(() => c.end());
  return c;
}

const NO_PROCESS = { cpuSeconds: () => 0, writeSyscalls: () => 0 };

describe('checkpoints during a bench scenario', () => {
  it('counts a checkpoint that began while the scenario ran, never a negative count', async () => {
    const c = await connect();
    const probe = () => checkpointsSoFar((text) => c.query(text));
    // The server's own checkpoints may come at any time: a scenario without one may count one,
    // never less than none; a scenario that runs CHECKPOINT counts at least that one.
    const quiet = await withResources(NO_PROCESS, async () => 'nothing', { checkpoints: probe });
    expect(quiet.resources.checkpoints).toBeGreaterThanOrEqual(0);
    const busy = await withResources(NO_PROCESS, async () => c.query('CHECKPOINT'), { checkpoints: probe });
    expect(busy.resources.checkpoints).toBeGreaterThanOrEqual(1);
  });

  it('reports them over the runs: none, which runs met one, or not measured', () => {
    expect(checkpointsIn([0, 0, 0])).toBe('0');
    expect(checkpointsIn([0, 2, 1])).toBe('3 (run 2, 3)');
    expect(checkpointsIn([undefined, 1])).toBe('1 (run 2)');
    expect(checkpointsIn([undefined, undefined])).toBe('—');
  });
});
