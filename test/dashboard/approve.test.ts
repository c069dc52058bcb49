/**
 * The dashboard in a real browser: a daemon started by the CLI with `--http 0`, a gated workflow
 * started through the SQL contract, the page opened in chromium. The test sees the workflow
 * running in the list, opens it, clicks approve and sees it complete (the status arrives by the
 * page's live update), with the approval recorded as the daemon's --user.
 */
import { describe, expect, it } from 'vitest';
import { envFor, spawnCli, writeJson } from '../cli/helpers.js';
import { createTestSchema, getSteps, insertWorkflow, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { CHROMIUM, openBrowser } from './browser.js';

const gated = {
  start: 'draft',
  steps: {
    draft: { tool: 'core.echo', args: { title: 'Quarterly report' }, next: 'review' },
    review: { description: 'Publish the quarterly report?', approval: true, next: 'publish' },
    publish: { tool: 'core.echo', args: { published: '{{steps.draft.result.title}}' }, done: true },
  },
};

// Skipped on a machine without chromium, but never in CI (.ci/run installs it; CI=true).
describe.skipIf(!CHROMIUM && process.env.CI !== 'true')('dashboard in chromium', () => {
  it('shows a running workflow, approves its gate with the button and sees it complete', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--user', 'dana'], { env: envFor(t) });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
    const id = await insertWorkflow(t, gated, {}, { name: 'quarterly-report', user: 'dana' });
    const gate = await waitForStep(t, id, 'review', 'pending');

    const browser = await openBrowser();
    const page = await browser.newPage();
    await page.goto(`${base}/`);
    const row = page.locator(`tr[data-workflow-id="${id}"]`);
    await row.waitFor();
    expect(await row.getAttribute('data-status')).toBe('running');
    expect(await row.locator('td.status').textContent()).toBe('running');

    await row.locator('a').first().click();
    await page.waitForURL(`${base}/workflows/${id}`);
    const section = page.locator(`section.gate[data-gate-step-id="${gate.id}"]`);
    await section.waitFor();
    expect(await section.locator('.message').textContent()).toBe('Publish the quarterly report?');
    expect(await page.locator('#workflow-status').textContent()).toBe('running');
    // The live stream is open before the click, so the completion arrives as an update.
    await page.waitForFunction(() => document.body.dataset.live === 'on' && Number(document.body.dataset.refreshed ?? 0) >= 1);

    await section.getByRole('button', { name: 'approve' }).click();
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('section.gate').count()).toBe(0);
    expect(await page.locator('li[data-step-name="publish"]').getAttribute('data-status')).toBe('done');

    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect((await getSteps(t, id)).find((s) => s.name === 'review')?.readied_by).toBe('dana');
    await daemon.kill('SIGTERM');
  });

  it('with api.tokens, signs in with the form and approves as the token user', async () => {
    const t = await createTestSchema();
    const config = await writeJson({ api: { tokens: { '${OPS_TOKEN}': 'olga' } } }, 'stepd.config.json');
    const token = 'olga-token-0123456789abcdef';
    const daemon = spawnCli(['start', '--http', '0', '--config', config], { env: { ...envFor(t), OPS_TOKEN: token } });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
    const id = await insertWorkflow(t, gated, {}, { name: 'quarterly-report', user: 'olga' });
    const gate = await waitForStep(t, id, 'review', 'pending');

    const browser = await openBrowser();
    const page = await browser.newPage();
    await page.goto(`${base}/workflows/${id}`);
    await page.waitForURL(/\/sign-in\?next=/);
    await page.locator('input[name="token"]').fill(token);
    await page.getByRole('button', { name: 'sign in' }).click();
    await page.waitForURL(`${base}/workflows/${id}`);
    expect(await page.locator('header .who').textContent()).toContain('olga');

    await page.locator(`section.gate[data-gate-step-id="${gate.id}"]`).getByRole('button', { name: 'approve' }).click();
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect((await getSteps(t, id)).find((s) => s.name === 'review')?.readied_by).toBe('olga');
    const cookies = await browser.cookies(base);
    expect(cookies.find((c) => c.name === 'stepd_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    await daemon.kill('SIGTERM');
  });

  it('updates an open page live when another client approves the gate', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0'], { env: envFor(t) });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
    const id = await insertWorkflow(t, gated, {}, { name: 'quarterly-report' });
    const gate = await waitForStep(t, id, 'review', 'pending');

    const browser = await openBrowser();
    const page = await browser.newPage();
    await page.goto(`${base}/workflows/${id}`);
    await page.waitForFunction(() => document.body.dataset.live === 'on');
    expect(await page.locator('#workflow-status').textContent()).toBe('running');

    // Approved through the SQL contract by another service: the page learns it from the events.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', readied_by = 'psql' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('li[data-step-name="review"]').textContent()).toContain('readied by psql');
    await daemon.kill('SIGTERM');
  });

  it('keeps a click on approve that is held down while a live update arrives (the swap waits for the release)', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--user', 'dana'], { env: envFor(t) });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
    const twoGates = {
      start: 'both',
      steps: {
        both: { parallel: ['review', 'legal'], join: 'publish' },
        review: { approval: true },
        legal: { approval: true },
        publish: { tool: 'core.echo', args: {}, done: true },
      },
    };
    const id = await insertWorkflow(t, twoGates, {}, { name: 'two-gates', user: 'dana' });
    const review = await waitForStep(t, id, 'review', 'pending');
    const legal = await waitForStep(t, id, 'legal', 'pending');

    const browser = await openBrowser();
    const page = await browser.newPage();
    await page.goto(`${base}/workflows/${id}`);
    await page.waitForFunction(() => document.body.dataset.live === 'on' && Number(document.body.dataset.refreshed ?? 0) >= 1);
    const approve = page.locator(`section.gate[data-gate-step-id="${review.id}"]`).getByRole('button', { name: 'approve' });
    const box = (await approve.boundingBox())!;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.down();
    // Another service approves the other gate meanwhile: the page hears it and means to swap.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', readied_by = 'psql' WHERE id = $1 AND status = 'pending'`, [legal.id]);
    await page.waitForFunction(() => document.body.dataset.heldBack === 'press');
    await page.mouse.up();
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    expect((await getSteps(t, id)).find((s) => s.name === 'review')?.readied_by).toBe('dana');
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await daemon.kill('SIGTERM');
  });
});
