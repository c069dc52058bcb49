/**
 * `stepd start --data-dir /proc/nope` (a folder that cannot be made) fails at once, naming the
 * folder and the reason; it used to hang burning CPU in Node's recursive mkdir.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers.js';

describe('stepd start with an unusable --data-dir', () => {
  it('exits at once with an error naming the directory and why', { timeout: 20_000 }, async () => {
    const started = Date.now();
    const r = await runCli(['start', '--data-dir', '/proc/nope']);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('stepd: could not start the embedded PostgreSQL in /proc/nope: Cannot use /proc/nope for the embedded PostgreSQL');
    expect(r.stderr).toMatch(/no such file or directory/);
  });
});
