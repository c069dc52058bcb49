/**
 * The workflow page's flow graph and attempts timeline in a real browser: a daemon started by the
 * CLI with `--http 0`, a workflow with a step done, a step running (a long sleep) and a step that
 * failed twice (retried) and went to its onError handler; chromium sees each step's box in its
 * state and each attempt on the timeline, then sees the running step turn cancelled live when the
 * workflow is cancelled through the SQL contract.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, waitFor } from '../helpers/db.js';
import { CHROMIUM, openBrowser } from './browser.js';
import { startPictureWorkflow } from './pictureFlow.js';

describe.skipIf(!CHROMIUM && process.env.CI !== 'true')('flow graph and timeline in chromium', () => {
  it('draws each step in its state and each attempt, and follows a change live', async () => {
    const t = await createTestSchema();
    const { daemon, base, id } = await startPictureWorkflow(t);

    const browser = await openBrowser();
    const page = await browser.newPage();
    await page.goto(`${base}/workflows/${id}`);
    const node = (name: string) => page.locator(`#flow-graph g.node[data-step="${name}"]`);
    await node('slow').waitFor();
    expect(await node('prepare').getAttribute('data-state')).toBe('done');
    expect(await node('fan').getAttribute('data-state')).toBe('done');
    expect(await node('slow').getAttribute('data-state')).toBe('running');
    expect(await node('flaky').getAttribute('data-state')).toBe('failed');
    expect(await node('flaky').locator('.node-state').textContent()).toBe('failed · 1 retry');
    expect(await node('recover').getAttribute('data-state')).toBe('done');
    expect(await node('publish').getAttribute('data-state')).toBe('none');
    // The boxes are drawn where dagre put them (inside the picture, not on top of each other) and coloured by the style sheet.
    // A live refresh may swap the picture between finding a box and measuring it (null then): measure again.
    const boxOf = (n: string) => waitFor(() => node(n).locator('rect').boundingBox().catch(() => null), `the box of ${n} measured`);
    const boxes = await Promise.all(['prepare', 'fan', 'slow', 'flaky'].map(boxOf));
    expect(boxes[0]!.y).toBeLessThan(boxes[1]!.y);
    expect(boxes[1]!.y).toBeLessThan(boxes[2]!.y);
    expect(Math.abs(boxes[2]!.x - boxes[3]!.x)).toBeGreaterThan(50);
    const fill = (n: string) => node(n).locator('rect').evaluate((r) => getComputedStyle(r).stroke);
    expect(await fill('slow')).not.toBe(await fill('flaky'));
    const edge = (from: string, to: string) => page.locator(`#flow-graph g.edge[data-from="${from}"][data-to="${to}"]`);
    expect(await edge('fan', 'slow').getAttribute('data-kind')).toBe('parallel');
    expect(await edge('flaky', 'recover').getAttribute('data-kind')).toBe('onError');
    expect(await edge('recover', 'publish').getAttribute('data-kind')).toBe('join');

    // The timeline: both attempts of flaky failed, the running sleep, one bar per row.
    const attempts = page.locator('#timeline g.attempt');
    expect(await attempts.count()).toBe((await getSteps(t, id)).length);
    const flaky = page.locator('#timeline g.attempt[data-step="flaky"]');
    expect(await flaky.count()).toBe(2);
    expect(await flaky.evaluateAll((gs) => gs.map((g) => `${g.getAttribute('data-attempt')}:${g.getAttribute('data-state')}`))).toEqual(['1:failed', '2:failed']);
    // The second attempt waited for its backoff (300 ms) before it ran: a waiting bar precedes its run.
    expect(await flaky.nth(1).locator('rect.wait').count()).toBe(1);
    expect(await page.locator('#timeline g.attempt[data-step="slow"]').getAttribute('data-state')).toBe('running');

    // Live: cancelling the workflow (the SQL contract) turns the running step cancelled on the open page.
    await page.waitForFunction(() => document.body.dataset.live === 'on');
    await t.q(`UPDATE ${t.schema}.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    await page.locator('#flow-graph g.node[data-step="slow"][data-state="cancelled"]').waitFor({ timeout: 30_000 });
    await waitFor(async () => (await getSteps(t, id)).find((s) => s.name === 'slow' && s.status === 'cancelled'), 'slow to be cancelled');
    await daemon.kill('SIGTERM');
  });
});
