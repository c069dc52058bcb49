/**
 * `stepd flow put|list|show` and `stepd run NAME`: the built CLI against the real database, an
 * executor in-process.
 */
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { createTestSchema, getWorkflow, startExecutor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { EXAMPLES, envFor, runCli, writeJson } from './helpers.js';

const greet = (tag: string) => ({ start: 'say', steps: { say: { tool: 'core.echo', args: { tag, topic: '{{input.topic}}' }, done: true, output: '{{result}}' } } });

describe('stepd flow', () => {
  it('put validates and prints the version; identical JSON again prints the existing version; list and show read them back', async () => {
    const t = await createTestSchema();
    const env = envFor(t);
    const v1 = await writeJson(greet('v1'), 'greet.json');
    const first = await runCli(['flow', 'put', v1], { env });
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe('greet version 1');
    // Same JSON, other key order and spacing: nothing stored.
    const same = await writeJson({ steps: greet('v1').steps, start: 'say' }, 'greet.json');
    const again = await runCli(['flow', 'put', same, '--json'], { env });
    expect(JSON.parse(again.stdout)).toEqual({ name: 'greet', version: 1, created: false });
    const v2 = await writeJson(greet('v2'), 'other.json');
    const second = await runCli(['flow', 'put', v2, '--name', 'greet', '--json'], { env });
    expect(JSON.parse(second.stdout)).toEqual({ name: 'greet', version: 2, created: true });

    const bad = await writeJson({ start: 'a', steps: { a: { tool: 'core.echo', next: 'nowhere' } } }, 'bad.json');
    const refused = await runCli(['flow', 'put', bad], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('steps.a.next');
    expect(await t.q(`SELECT 1 FROM stepd.flows WHERE name = 'bad'`)).toEqual([]);

    const list = await runCli(['flow', 'list', '--json'], { env });
    expect(JSON.parse(list.stdout)).toMatchObject([{ name: 'greet', version: 2, versions: 2 }]);
    const text = await runCli(['flow', 'list'], { env });
    expect(text.stdout).toMatch(/^greet\s+2\s+2\s/m);
    const versions = await runCli(['flow', 'list', 'greet', '--json'], { env });
    expect(JSON.parse(versions.stdout).map((v: { version: number }) => v.version)).toEqual([2, 1]);

    const show = await runCli(['flow', 'show', 'greet@1'], { env });
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toEqual(greet('v1'));
    expect(show.stderr).toContain('greet version 1');
    const showJson = await runCli(['flow', 'show', 'greet', '--json'], { env });
    expect(JSON.parse(showJson.stdout)).toMatchObject({ name: 'greet', version: 2, flow: greet('v2') });
    const missing = await runCli(['flow', 'show', 'greet@9'], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('has no version 9 (its latest version is 2');
    const help = await runCli(['flow', 'put', '--help'], { env });
    expect(help.stdout).toContain('Examples:');
  });

  it('run NAME starts the registered flow by name (pinned at admission), NAME@VERSION an older one; an unknown name starts nothing', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    await runCli(['flow', 'put', await writeJson(greet('v1'), 'greet.json')], { env });
    await runCli(['flow', 'put', await writeJson(greet('v2'), 'greet.json')], { env });

    const latest = await runCli(['run', 'greet', '--input', '{"topic": "x"}', '--follow'], { env });
    expect(latest.stderr).toBe('');
    expect(latest.code).toBe(0);
    const id = /started workflow (\d+) \(greet\)/.exec(latest.stdout)![1]!;
    expect(await getWorkflow(t, id)).toMatchObject({ status: 'completed', flow_version: 2, output: { tag: 'v2', topic: 'x' } });

    const older = await runCli(['run', 'greet@1', '--input', '{"topic": "y"}', '--json'], { env });
    const olderId = JSON.parse(older.stdout).id as string;
    expect(await waitForWorkflow(t, olderId)).toMatchObject({ status: 'completed', flow_version: 1, output: { tag: 'v1', topic: 'y' } });

    const unknown = await runCli(['run', 'nope'], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no flow named "nope" is registered');
    const missingFile = await runCli(['run', 'nope.json'], { env });
    expect(missingFile.stderr).toContain('flow file nope.json does not exist');
    expect(await t.q(`SELECT 1 FROM stepd.workflows WHERE name = 'nope'`)).toEqual([]);
  });

  it('runs examples/purchase.json as documented: put, run by name (input checked), approve by a listed approver with valid data', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    const put = await runCli(['flow', 'put', path.join(EXAMPLES, 'purchase.json')], { env });
    expect(put.stdout.trim()).toBe('purchase version 1');
    const badInput = await runCli(['run', 'purchase', '--input', '{"item": "GPU", "amount": -1}'], { env });
    expect(badInput.code).toBe(1);
    expect(badInput.stderr).toContain('input.amount: must be > 0');
    const started = await runCli(['run', 'purchase', '--input', '{"item": "GPU", "amount": 1200}', '--json'], { env });
    const id = JSON.parse(started.stdout).id as string;
    const gate = await waitForStep(t, id, 'approve', 'pending');
    expect(gate.args).toMatchObject({ message: 'Buy GPU for 1200 EUR?' });
    const notListed = await runCli(['approve', gate.id, '--data', '{"budgetCode": "IT-2026"}', '--by', 'mallory'], { env });
    expect(notListed.code).toBe(1);
    const badData = await runCli(['approve', gate.id, '--data', '{"budgetCode": "it"}', '--by', 'finance-ann'], { env });
    expect(badData.stderr).toContain('result.budgetCode: must match pattern');
    const ok = await runCli(['approve', gate.id, '--data', '{"budgetCode": "IT-2026"}', '--by', 'finance-ann'], { env });
    expect(ok.code).toBe(0);
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { ordered: 'GPU', amount: 1200, budgetCode: 'IT-2026' } });
  });
});
