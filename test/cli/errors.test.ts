/**
 * What the CLI says when something is wrong, and the exit codes scripts rely on: validation,
 * bad arguments, missing rows, no database. Also --help and the bin launcher.
 */
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { freePort } from '../helpers/ports.js';
import { EXAMPLES, ROOT, childEnv, envFor, runCli, tempDir, writeJson, TEST_DATABASE_URL } from './helpers.js';

/** A local port nothing listens on. */
const closedPort = freePort;

describe('stepd validate', () => {
  it('accepts every example (exit 0)', async () => {
    const files = (await readdir(EXAMPLES)).filter((f) => f.endsWith('.json')).map((f) => path.join(EXAMPLES, f));
    expect(files.length).toBeGreaterThanOrEqual(6);

    const r = await runCli(['validate', ...files]);

    expect(r.code).toBe(0);
    for (const f of files) expect(r.stdout).toContain(`${f}: valid (`);
  });

  it('prints every issue of a bad flow with its JSON path and exits 1', async () => {
    const flow = await writeJson({
      start: 'a',
      steps: {
        a: { tool: 'core.echo', next: 'nowhere' },
        b: { tool: 'core.echo', branch: [{ if: 'result ==', then: 'a' }] },
      },
    });

    const r = await runCli(['validate', flow]);
    const json = await runCli(['validate', flow, '--json']);

    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/issue\(s\)/);
    expect(r.stdout).toMatch(/^ {2}steps\.a\.next: .*nowhere/m);
    expect([json.code, json.signal, json.stderr]).toEqual([1, null, '']);
    const [result] = JSON.parse(json.stdout) as { file: string; valid: boolean; issues: { path: string; message: string }[] }[];
    expect(json.code).toBe(1);
    expect(result).toMatchObject({ file: flow, valid: false });
    expect(result!.issues).toContainEqual(expect.objectContaining({ path: 'steps.a.next' }));
    expect(result!.issues.every((i) => typeof i.path === 'string' && i.message.length > 0)).toBe(true);
  });

  it('reports a shape error with its path, a file that is not JSON, and a missing file', async () => {
    const shape = await writeJson({ start: 'a', steps: { a: { tool: 'core.echo', retry: { maxAttempts: 'three' } } } });
    const notJson = await writeJson('{"start": ', 'broken.json');

    const r = await runCli(['validate', shape, notJson, '/nonexistent/flow.json']);

    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^ {2}steps\.a\.retry\.maxAttempts: /m);
    expect(r.stdout).toContain(`${notJson}: 1 issue(s)\n  (flow): flow file ${notJson} is not valid JSON`);
    expect(r.stdout).toContain('(flow): flow file /nonexistent/flow.json does not exist');
  });
});

describe('clear errors and exit codes', () => {
  it('refuses to start an invalid flow and inserts nothing (exit 1)', async () => {
    const t = await createTestSchema();
    const flow = await writeJson({ start: 'a', steps: { a: { tool: 'core.echo', next: 'missing' } } });

    const r = await runCli(['run', flow], { env: envFor(t) });

    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/is not a valid flow \(1 issue\(s\)\); nothing was started:\n {2}steps\.a\.next: /);
    expect(await t.q(`SELECT id FROM stepd.workflows`)).toEqual([]);
  });

  it('names the option when a JSON argument is not JSON or not an object (exit 1)', async () => {
    const t = await createTestSchema();
    const flow = path.join(EXAMPLES, 'sequential.json');

    const badJson = await runCli(['run', flow, '--input', '{topic: AI}'], { env: envFor(t) });
    const notObject = await runCli(['run', flow, '--input', '[1, 2]'], { env: envFor(t) });
    const badData = await runCli(['approve', '1', '--data', 'yes please'], { env: envFor(t) });

    expect(badJson.code).toBe(1);
    expect(badJson.stderr).toMatch(/^stepd: --input is not valid JSON: .+\n {2}got: \{topic: AI\}\n$/);
    expect(notObject.code).toBe(1);
    expect(notObject.stderr).toBe('stepd: --input must be a JSON object, like \'{"topic": "AI safety"}\' (got [1, 2])\n');
    expect(badData.code).toBe(1);
    expect(badData.stderr).toMatch(/^stepd: --data is not valid JSON: /);
    expect(await t.q(`SELECT id FROM stepd.workflows`)).toEqual([]);
  });

  it('says which step or workflow id is wrong (exit 1)', async () => {
    const t = await createTestSchema();

    const notANumber = await runCli(['approve', 'abc'], { env: envFor(t) });
    const noStep = await runCli(['approve', '424242'], { env: envFor(t) });
    const noWorkflow = await runCli(['status', '424242'], { env: envFor(t) });
    const noCancel = await runCli(['cancel', '424242'], { env: envFor(t) });

    expect(notANumber.code).toBe(1);
    expect(notANumber.stderr).toBe('stepd: step id must be a positive whole number (got "abc")\n');
    expect(noStep.code).toBe(1);
    expect(noStep.stderr).toBe(`stepd: step 424242 does not exist in schema "${t.schema}" (see the step ids with: stepd status WORKFLOW_ID)\n`);
    expect(noWorkflow.code).toBe(1);
    expect(noWorkflow.stderr).toBe(`stepd: workflow 424242 does not exist in schema "${t.schema}" (list them with: stepd list)\n`);
    expect(noCancel.code).toBe(1);
  });

  it('exits 4 when the database cannot be reached, naming the URL without its password', async () => {
    const url = `postgres://someone:secret@127.0.0.1:${await closedPort()}/test`;

    const list = await runCli(['list'], { env: { DATABASE_URL: url } });
    const run = await runCli(['run', path.join(EXAMPLES, 'sequential.json'), '--database-url', url]);
    const approve = await runCli(['approve', '1'], { env: { DATABASE_URL: url } });
    // The daemon reports it through DaemonStartError (src/daemon/), which the command words the same.
    const start = await runCli(['start', '--database-url', url]);

    for (const r of [list, run, approve, start]) {
      expect(r.code).toBe(4);
      expect(r.stderr).toMatch(/^stepd: cannot reach the database at postgres:\/\/someone:\*\*\*@127\.0\.0\.1:\d+\/test: .*ECONNREFUSED/);
      expect(r.stderr).not.toContain('secret');
    }
  });

  it('exits 4 when the schema has no stepd tables, saying how to create them', async () => {
    const r = await runCli(['list', '--schema', 'no_such_schema'], { env: { DATABASE_URL: TEST_DATABASE_URL } });

    expect(r.code).toBe(4);
    expect(r.stderr).toContain('has no stepd tables in schema "no_such_schema". Run `stepd migrate`');
  });

  it('without DATABASE_URL and no daemon in the folder, says how to start one (exit 4)', async () => {
    const folder = await tempDir();

    const r = await runCli(['status', '1'], { cwd: folder });

    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`no embedded PostgreSQL is running for ${path.join(folder, '.stepd')}`);
    expect(r.stderr).toContain('npx stepd start');
    expect(r.stderr).toContain('npm start');
  });
});

describe('help', () => {
  it('documents the exit codes and has examples for every command', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('Exit codes:');
    expect(top.stdout).toMatch(/4 {2}the database cannot be reached/);
    const commands = ['start', 'run', 'status', 'list', 'approve', 'cancel', 'validate', 'watch', 'migrate'];
    const results = await Promise.all(commands.map((cmd) => runCli([cmd, '--help'])));
    for (const [i, cmd] of commands.entries()) {
      const r = results[i]!;
      expect(r.code, cmd).toBe(0);
      expect(r.stdout, cmd).toContain('Examples:');
      expect(r.stdout, cmd).toContain('Exit codes:');
    }
  });

  it('an unknown command or option is invalid input (exit 1)', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(1);
    expect((await runCli(['run', '--bogus'])).code).toBe(1);
  });

  it('the bin launcher runs the CLI', async () => {
    const r = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'stepd.js'), '--help'], { env: childEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.on('close', (code) => resolve({ code, stdout }));
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: stepd');
  });
});
