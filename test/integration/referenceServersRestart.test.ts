/**
 * server-everything over Streamable HTTP killed in the middle of a long-running call (SIGKILL,
 * as a crash would): the step fails at once as retryable connection loss, not at its timeout,
 * and the retry succeeds on a new session once the server is back on the same port. Also:
 * `stepd run --follow` prints the progress of the long-running call (the built CLI,
 * dist/src/cli.js, following a workflow an in-process executor runs).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpProviders } from '../../src/tools/mcp/index.js';
import { runCli, envFor, writeJson } from '../cli/helpers.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow } from '../helpers/db.js';
import { everythingHttp, everythingStdio, type EverythingHttp } from '../mcp-servers/referenceServers.js';
import { silentLogger } from '../tools/helpers.js';

const servers: EverythingHttp[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('server-everything over Streamable HTTP, killed mid-call', () => {
  it('fails the running step as retryable connection loss, and the next attempt succeeds on a new session once the server is back', async () => {
    const server = await everythingHttp();
    servers.push(server);
    const t = await createTestSchema();
    const providers = createMcpProviders({ everything: { url: server.url } }, { log: silentLogger(), idleMs: 60_000 });
    onCleanup(async () => {
      await Promise.all(providers.map((p) => p.close()));
    });
    await startExecutor(t, { tools: providers });
    const flow = {
      start: 'long',
      steps: {
        long: {
          tool: 'everything.trigger-long-running-operation',
          args: { duration: 3, steps: 6 },
          // Far beyond what the test waits: the first attempt must not end by its timeout.
          timeout: '5m',
          // Room for the server to start again before attempt 2 (it takes well under a second).
          retry: { maxAttempts: 3, initial: '5s', max: '5s', jitter: false },
          done: true,
        },
      },
    };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    // The call is under way on the server: its first progress is on the row.
    await waitFor(async () => (await getSteps(t, id))[0]?.progress, 'the first progress of the call');
    const sessionsBefore = server.output().split('Session initialized').length - 1;
    await server.kill();
    const failed = await waitFor(async () => (await getSteps(t, id)).find((s) => s.attempt === 1 && s.status === 'failed'), 'attempt 1 to fail');
    expect(failed.error).toMatchObject({ code: 'mcp_connection_lost', retryable: true });
    await server.start();

    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toContain('Long running operation completed');
    expect((await getSteps(t, id)).map((s) => [s.attempt, s.status])).toEqual([
      [1, 'failed'],
      [2, 'done'],
    ]);
    // The restarted server opened a session of its own for the retry.
    expect(server.output().split('Session initialized').length - 1).toBe(sessionsBefore + 1);
  });
});

describe('stepd run --follow', () => {
  it('prints the progress of a long-running MCP call as it arrives', async () => {
    const t = await createTestSchema();
    const providers = createMcpProviders({ everything: everythingStdio() }, { log: silentLogger(), idleMs: 60_000 });
    onCleanup(async () => {
      await Promise.all(providers.map((p) => p.close()));
    });
    await startExecutor(t, { tools: providers });
    const flow = await writeJson({ start: 'long', steps: { long: { tool: 'everything.trigger-long-running-operation', args: { duration: 2, steps: 4 }, done: true } } });
    const r = await runCli(['run', flow, '--follow'], { env: envFor(t) });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/long #\d+ progress [1-4]\/4 \(\d+%\)/);
    const lines = r.stdout.split('\n');
    const progressAt = lines.findIndex((l) => l.includes(' progress '));
    expect(progressAt).toBeGreaterThan(lines.findIndex((l) => l.includes('long #') && l.includes('started')));
    expect(progressAt).toBeLessThan(lines.findIndex((l) => l.includes('long #') && l.includes(' done')));
  });
});
