/**
 * The user's stepd settings, which tests keep away from what they run: DATABASE_URL, STEPD_*,
 * libpq's PG* variables and OpenTelemetry's OTEL_*. STEPD_TEST_* (knobs of the tests) and
 * STEPD_NODE_CACHE (where Node 22 is cached) are not settings of stepd. No vitest import: test/globalSetup.ts uses this too.
 */
export function isUserSetting(name: string): boolean {
  // OTEL_*: a collector the user exports to must not receive the tests' spans.
  if (name === 'DATABASE_URL' || name.startsWith('PG') || name.startsWith('OTEL_')) return true;
  return name.startsWith('STEPD_') && !name.startsWith('STEPD_TEST_') && name !== 'STEPD_NODE_CACHE';
}

/**
 * The environment for a child process: this process's, without the user's settings and without
 * npm's word that npm runs it (npm_lifecycle_*: `npm test` sets them for the tests, not for what
 * they start), plus `extra` (undefined removes).
 */
export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!isUserSetting(name) && !name.startsWith('npm_lifecycle_')) env[name] = value;
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}
