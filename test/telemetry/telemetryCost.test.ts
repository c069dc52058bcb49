/**
 * Metrics and traces cost nothing when not asked for: `stepd start` without --http and without
 * OTEL_* loads neither prom-client nor any OpenTelemetry package; with them, it does. What is
 * checked is what gets loaded (a module resolve hook records the packages), not timings.
 */
import { describe, expect, it } from 'vitest';
import { CLI, envFor, spawnCli, tempDir } from '../cli/helpers.js';
import { createTestSchema } from '../helpers/db.js';
import { packageLog } from '../helpers/packageLog.js';


/** Runs `stepd start ARGS` until it is ready and returns the npm packages it loaded. */
async function packagesOfStart(args: string[], env: Record<string, string>): Promise<Set<string>> {
  const packages = await packageLog(await tempDir());
  // --no-schedules: a stop right after start-up would otherwise wait for the scheduler's first look (not what is tested here).
  const daemon = spawnCli(['start', '--no-schedules', ...args], { command: [process.execPath, '--import', packages.importFlag, CLI], env });
  await daemon.waitFor(/stepd: (ready|dashboard)/);
  const { code } = await daemon.kill('SIGTERM');
  expect(code).toBe(0);
  return packages.loaded();
}

const telemetry = (loaded: Set<string>) => [...loaded].filter((p) => p === 'prom-client' || p.startsWith('@opentelemetry/')).sort();

describe('the cost of metrics and traces', () => {
  it('stepd start without --http or OTEL_* loads no prom-client and no OpenTelemetry package', async () => {
    const t = await createTestSchema();
    expect(telemetry(await packagesOfStart([], envFor(t)))).toEqual([]);
  });

  it('with --http it loads prom-client, and with OTEL_EXPORTER_OTLP_ENDPOINT the OpenTelemetry SDK', async () => {
    const t = await createTestSchema();
    const loaded = telemetry(await packagesOfStart(['--http', '0'], { ...envFor(t), OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }));
    expect(loaded).toContain('prom-client');
    expect(loaded).toContain('@opentelemetry/sdk-trace-base');
    expect(loaded).toContain('@opentelemetry/exporter-trace-otlp-http');
  });
});
