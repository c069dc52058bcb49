/**
 * The README's screenshots (docs/images/dashboard-*.png), taken only when asked:
 *   STEPD_TEST_SCREENSHOTS=docs/images npx vitest run test/dashboard/screenshots.test.ts
 * A few workflows in the states an operator meets (completed fan-out, failed, cancelled, waiting
 * at a gate), then the list and one workflow page; and a workflow's flow graph and attempts
 * (dashboard-graph.png; only it: add `-t "flow graph"`).
 */
import path from 'node:path';
import { describe, it } from 'vitest';
import { ROOT, envFor, spawnCli } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { CHROMIUM, openBrowser } from './browser.js';
import { startPictureWorkflow } from './pictureFlow.js';

const OUT = process.env.STEPD_TEST_SCREENSHOTS;

const release = {
  start: 'build',
  steps: {
    build: { tool: 'core.echo', args: { version: '{{input.version}}', artifact: 'app-{{input.version}}.tar.gz' }, next: 'tests' },
    tests: { forEach: { items: '{{input.suites}}', step: 'run_suite', as: 'suite' }, join: 'approve_deploy' },
    run_suite: { tool: 'core.sleep', args: { ms: '{{suite.ms}}' }, next: 'report_suite' },
    report_suite: { tool: 'core.echo', args: { suite: '{{suite.name}}', passed: true } },
    approve_deploy: {
      approval: { message: 'Deploy {{steps.build.result.artifact}} to production? All test suites passed.', approvers: ['alice', 'ops-*'] },
      next: 'deploy',
    },
    deploy: { tool: 'core.echo', args: { deployed: '{{steps.build.result.artifact}}' }, done: true },
  },
};

const echo = (name: string) => ({ start: name, steps: { [name]: { tool: 'core.echo', args: { ok: true }, done: true } } });

describe.runIf(OUT && CHROMIUM)('README screenshots', () => {
  it('takes the list and a workflow page', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--user', 'alice'], { env: envFor(t) });
    const base = (await daemon.waitFor(/stepd: dashboard at (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;

    const nightly = await insertWorkflow(t, echo('import_orders'), { day: '2026-11-24' }, { name: 'nightly-import', user: 'etl' });
    await waitForWorkflow(t, nightly);
    const failing = {
      start: 'fetch',
      steps: { fetch: { tool: 'core.fail', args: { code: 'http_503', message: 'crm.example.com answered 503 Service Unavailable' } } },
    };
    const sync = await insertWorkflow(t, failing, {}, { name: 'sync-crm', user: 'bob' });
    await waitForWorkflow(t, sync);
    const cancelled = await insertWorkflow(t, { start: 'wait', steps: { wait: { approval: true } } }, {}, { name: 'onboarding', user: 'carol' });
    await waitForStep(t, cancelled, 'wait', 'pending');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [cancelled]);
    await waitForWorkflow(t, cancelled);
    const suites = [{ name: 'unit', ms: 40 }, { name: 'integration', ms: 120 }, { name: 'e2e', ms: 80 }];
    const id = await insertWorkflow(t, release, { version: '2.3.0', suites }, { name: 'release', user: 'alice' });
    await waitForStep(t, id, 'approve_deploy', 'pending');

    const browser = await openBrowser({ width: 1100, height: 700 });
    const page = await browser.newPage();
    await page.goto(`${base}/`);
    await page.locator(`tr[data-workflow-id="${id}"]`).waitFor();
    await page.screenshot({ path: path.resolve(ROOT, OUT!, 'dashboard-list.png') });

    await page.goto(`${base}/workflows/${id}`);
    await page.locator('section.gate').waitFor();
    await page.locator('li[data-step-name="build"] details').first().evaluate((d) => ((d as HTMLDetailsElement).open = true));
    await page.setViewportSize({ width: 1100, height: 1000 });
    await page.screenshot({ path: path.resolve(ROOT, OUT!, 'dashboard-workflow.png'), fullPage: true });
    await daemon.kill('SIGTERM');
  });

  it('takes the flow graph and the attempts timeline', async () => {
    const t = await createTestSchema();
    const { daemon, base, id } = await startPictureWorkflow(t);
    const browser = await openBrowser({ width: 1100, height: 1000 });
    const page = await browser.newPage();
    await page.goto(`${base}/workflows/${id}`);
    await page.locator('#timeline').waitFor();
    const top = (await page.locator('h3', { hasText: 'Flow' }).boundingBox())!;
    const bottom = (await page.locator('#timeline').boundingBox())!;
    await page.screenshot({ path: path.resolve(ROOT, OUT!, 'dashboard-graph.png'), fullPage: true, clip: { x: 0, y: top.y - 8, width: 1100, height: bottom.y + bottom.height + 24 - (top.y - 8) } });
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    await daemon.kill('SIGTERM');
  });
});
