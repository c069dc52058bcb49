/**
 * The bench's PostgreSQL CPU probe counts the backends of the client process it is given (by
 * their client ports), only those of the application name asked for, and the CPU they used
 * while it measured.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { BackendCpuProbe, localTcpPorts } from '../../scripts/bench/backendCpu.js';
import { onCleanup, TEST_DATABASE_URL } from '../helpers/db.js';

async function connect(applicationName: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL, application_name: applicationName });
  await c.connect();
  onCleanup(() => c.end());
  return c;
}

const BUSY = 'SELECT count(*) FROM generate_series(1, 2000000)';

describe('bench backend CPU probe', () => {
  it("finds this process's connections by their local ports", async () => {
    const c = await connect('stepd-test-probe-ports');
    const { rows: [r] } = await c.query<{ port: number }>('SELECT client_port AS port FROM pg_stat_activity WHERE pid = pg_backend_pid()');
    expect(localTcpPorts(process.pid)).toContain(r!.port);
  });

  it('counts the CPU of the named backends during the measurement, not that of others', async () => {
    const reader = await connect('stepd-test-probe-reader');
    const measured = await connect('stepd-test-probe-measured');
    const other = await connect('stepd-test-probe-other');
    await measured.query(BUSY); // before the measurement: not counted
    const probe = new BackendCpuProbe({ query: (text, values) => reader.query(text, values), clientPid: process.pid, applicationName: 'stepd-test-probe-measured', intervalMs: 20 });
    await probe.start();
    await other.query(BUSY);
    const idle = await probe.stop();
    expect(idle.backends).toBe(1);
    expect(idle.cpuSeconds).toBeLessThan(0.05);

    const busy = new BackendCpuProbe({ query: (text, values) => reader.query(text, values), clientPid: process.pid, applicationName: 'stepd-test-probe-measured', intervalMs: 20 });
    await busy.start();
    await measured.query(BUSY);
    await measured.query(BUSY);
    const used = await busy.stop();
    expect(used.backends).toBe(1);
    expect(used.cpuSeconds).toBeGreaterThan(0.05);
  });
});
