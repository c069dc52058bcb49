/**
 * After a refused POST (403: cancelling another user's workflow) the page shown is the workflow's
 * page, but its address is the POST's (`/workflows/ID/cancel`). Its live refresh must read the
 * workflow page (`/workflows/ID`), not GET the POST's address (a 404, so the page froze).
 */
import { describe, expect, it } from 'vitest';
import { envFor, runCli, spawnCli } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { CHROMIUM, openBrowser } from './browser.js';

const gated = { start: 'review', steps: { review: { approval: true, next: 'publish' }, publish: { tool: 'core.echo', args: {}, done: true } } };

describe.skipIf(!CHROMIUM && process.env.CI !== 'true')('dashboard live refresh after a refused action', () => {
  it('keeps reading the workflow page, never GETs the POST address', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--user', 'dana'], { env: envFor(t) });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
    const id = await insertWorkflow(t, gated, {}, { name: 'not-danas', user: 'alice' });
    const gate = await waitForStep(t, id, 'review', 'pending');

    const browser = await openBrowser();
    const page = await browser.newPage();
    page.on('dialog', (d) => void d.accept());
    const gets: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'GET') gets.push(new URL(r.url()).pathname);
    });
    await page.goto(`${base}/workflows/${id}`);
    await page.getByRole('button', { name: 'cancel workflow' }).click();
    await page.waitForURL(`${base}/workflows/${id}/cancel`);
    expect(await page.locator('#problem').textContent()).toContain('dana');
    await page.waitForFunction(() => document.body.dataset.live === 'on');

    const approved = await runCli(['approve', gate.id], { env: envFor(t) });
    expect(approved.code, approved.stderr).toBe(0);
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect(gets.filter((p) => p.endsWith('/cancel'))).toEqual([]);
    await daemon.kill('SIGTERM');
  });
});
