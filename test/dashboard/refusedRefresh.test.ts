/**
 * After a refused POST (403: cancelling another user's workflow) the page shown is the workflow's
 * page, answered at the POST's address (`/workflows/ID/cancel`). The page puts its own address
 * (`/workflows/ID`) in the address bar: its live refresh reads the workflow page, never GETs the
 * POST's address (a 404, so the page froze), and a reload GETs the page, never posts the form again.
 */
import { describe, expect, it } from 'vitest';
import { envFor, runCli, spawnCli } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { CHROMIUM, openBrowser } from './browser.js';

const gated = { start: 'review', steps: { review: { approval: true, next: 'publish' }, publish: { tool: 'core.echo', args: {}, done: true } } };

describe.skipIf(!CHROMIUM && process.env.CI !== 'true')('dashboard live refresh after a refused action', () => {
  it('shows the workflow page\'s address, keeps reading that page, and a reload does not post the form again', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--user', 'dana'], { env: envFor(t) });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
    const id = await insertWorkflow(t, gated, {}, { name: 'not-danas', user: 'alice' });
    const gate = await waitForStep(t, id, 'review', 'pending');

    const browser = await openBrowser();
    const page = await browser.newPage();
    page.on('dialog', (d) => void d.accept());
    const gets: string[] = [];
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'GET') gets.push(new URL(r.url()).pathname);
      if (r.method() === 'POST') posts.push(new URL(r.url()).pathname);
    });
    await page.goto(`${base}/workflows/${id}`);
    // Subscribed and read once more (the `ready` read): the click below is not raced by that swap.
    await page.waitForFunction(() => Number(document.body.dataset.refreshed ?? 0) >= 1);
    const refusal = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === `/workflows/${id}/cancel`);
    await page.getByRole('button', { name: 'cancel workflow' }).click();
    expect((await refusal).status()).toBe(403);
    expect(await page.locator('#problem').textContent()).toContain('dana');
    await page.waitForURL(`${base}/workflows/${id}`);
    expect(posts).toEqual([`/workflows/${id}/cancel`]);
    await page.waitForFunction(() => document.body.dataset.live === 'on');

    const approved = await runCli(['approve', gate.id], { env: envFor(t) });
    expect(approved.code, approved.stderr).toBe(0);
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect(gets.filter((p) => p.endsWith('/cancel'))).toEqual([]);

    // A reload reads the workflow page: no second POST, no refusal shown again.
    const reloaded = await page.reload();
    expect(reloaded?.request().method()).toBe('GET');
    expect(reloaded?.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe(`/workflows/${id}`);
    await page.locator('#workflow-status', { hasText: 'completed' }).waitFor();
    expect(await page.locator('#problem').count()).toBe(0);
    expect(posts).toEqual([`/workflows/${id}/cancel`]);
    await daemon.kill('SIGTERM');
  });
});
