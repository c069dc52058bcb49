/**
 * `stepd list | head -1` and `stepd schedule add … | head -1`: a reader that closes the pipe early
 * must not make the CLI die with an EPIPE stack trace. `head -n 0` closes its end before the CLI
 * writes anything (the CLI first reads the database), so the write always meets a closed pipe.
 * Real shells, real pipes; the CLI's own exit status comes from bash's PIPESTATUS.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { CLI, childEnv, envFor } from './helpers.js';

function pipeToHead(args: string[], env: Record<string, string>): Promise<{ stdout: string; stderr: string; code: number | null }> {
  const quoted = args.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
  const script = `"$NODE" "$CLI" ${quoted} | head -n 0; echo "cli=\${PIPESTATUS[0]}"`;
  const child = spawn('bash', ['-c', script], { env: { ...childEnv(env), NODE: process.execPath, CLI }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ stdout, stderr, code })));
}

describe('a closed stdout', () => {
  it('stepd list | head: no EPIPE trace, exit 0', { timeout: 60_000 }, async () => {
    const t = await createTestSchema();
    for (let i = 0; i < 30; i++) await t.q(`INSERT INTO stepd.workflows (name, flow) VALUES ($1, '{"start": {"tool": "core.echo", "done": true}}')`, [`w${i}`]);
    const r = await pipeToHead(['list'], envFor(t));
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('cli=0');
  });

  it('stepd schedule add … | head: the schedule is stored, no EPIPE trace', { timeout: 60_000 }, async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify({ start: { tool: 'core.echo', args: {}, done: true } })]);
    const r = await pipeToHead(['schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--flow', 'report'], envFor(t));
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('cli=0');
    expect(await t.q(`SELECT name FROM stepd.schedules`)).toEqual([{ name: 'nightly' }]);
  });
});
