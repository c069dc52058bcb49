/**
 * The dashboard's day-two buttons against the real database (an executor in-process): the fork
 * form of a workflow's page, and the list's multi-select and filter bulk cancel / retry with the
 * dry run shown first. As a user: its own workflows only.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getWorkflow, insertWorkflow, startExecutor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { buildTestApp, formPost, gatedFlow } from './helpers.js';

const html = { accept: 'text/html' };
const CHAIN = {
  start: 'fetch',
  steps: {
    fetch: { tool: 'core.echo', args: { rows: '{{input.rows}}' }, next: 'publish' },
    publish: { tool: 'core.echo', args: { published: '{{steps.fetch.result.rows}}' }, done: true, output: '{{result}}' },
  },
};

describe('dashboard: fork and bulk actions', () => {
  it('forks a workflow from a step with a corrected result and shows the fork', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, CHAIN, { rows: 1 }, { name: 'report', user: 'carol' });
    await waitForWorkflow(t, id);
    const { request, sessions } = buildTestApp(t, { localUser: 'carol' });
    const page = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(page).toContain(`action="/workflows/${id}/fork"`);
    expect(page).toContain('<option value="publish">publish</option>');
    const csrf = sessions.csrfToken('carol');
    const res = await request(`/workflows/${id}/fork`, formPost({ csrf, from: 'publish', results: '{"fetch": {"rows": 7}}' }));
    expect(res.status).toBe(303);
    const forkId = /\/workflows\/(\d+)$/.exec(res.headers.get('location') ?? '')![1]!;
    expect((await waitForWorkflow(t, forkId)).output).toEqual({ published: 7 });

    const bad = await request(`/workflows/${id}/fork`, formPost({ csrf, results: '{"fetch": ' }));
    expect(bad.status).toBe(400);
    const badPage = await bad.text();
    expect(badPage).toContain('the results is not valid JSON');
    // The refusal names the workflow's page as its address: a reload GETs it, never forks again.
    expect(badPage).toContain(`data-page-url="/workflows/${id}"`);
    // Another user may not fork carol's workflow.
    const other = buildTestApp(t, { localUser: 'dave' });
    const refused = await other.request(`/workflows/${id}/fork`, formPost({ csrf: other.sessions.csrfToken('dave') }));
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain('may not fork workflow');
  });

  it('cancels the selected workflows after a dry run; a filter with nothing selected acts on its matches, the user\'s own only', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const mine = [await insertWorkflow(t, gatedFlow, {}, { name: 'job', user: 'carol' }), await insertWorkflow(t, gatedFlow, {}, { name: 'job', user: 'carol' })];
    const theirs = await insertWorkflow(t, gatedFlow, {}, { name: 'job', user: 'dave' });
    for (const id of [...mine, theirs]) await waitForStep(t, id, 'review', 'pending');
    const { request, sessions } = buildTestApp(t, { localUser: 'carol' });
    const list = await (await request('/', { headers: html })).text();
    expect(list).toContain(`<input type="checkbox" name="ids" value="${mine[0]}" form="bulk"`);
    const csrf = sessions.csrfToken('carol');

    const post = (fields: [string, string][]) =>
      request('/workflows/bulk', { ...formPost({}), body: new URLSearchParams([['csrf', csrf], ...fields]).toString() });
    const dry = await (await post([['action', 'cancel'], ['dryRun', '1'], ['ids', mine[0]!], ['ids', theirs]])).text();
    expect(dry).toContain('1 workflow(s) would be cancelled');
    expect(dry).toContain(`data-workflow-id="${mine[0]}"`);
    expect(dry).not.toContain(`data-workflow-id="${theirs}"`);
    expect((await getWorkflow(t, mine[0]!)).status).toBe('running');
    const done = await (await post([['action', 'cancel'], ['ids', mine[0]!], ['ids', theirs]])).text();
    expect(done).toContain('1 workflow(s) cancelled');
    // The result names the list as its address: a reload GETs the list, never posts the action again.
    expect(done).toContain('data-page-url="/"');
    expect((await getWorkflow(t, mine[0]!)).status).toBe('cancelled');
    expect((await getWorkflow(t, theirs)).status).toBe('running');

    const byName = await (await post([['action', 'cancel'], ['name', 'job']])).text();
    expect(byName).toContain('1 workflow(s) cancelled');
    expect((await getWorkflow(t, mine[1]!)).status).toBe('cancelled');
    expect((await getWorkflow(t, theirs)).status).toBe('running');

    const nothing = await post([['action', 'cancel']]);
    expect(nothing.status).toBe(400);
    expect(await nothing.text()).toContain('data-page-url="/"');
    // Without the session's CSRF token the post is refused before anything runs.
    const forged = await request('/workflows/bulk', formPost({ action: 'cancel', name: 'job' }));
    expect(forged.status).toBe(403);
    expect((await getWorkflow(t, theirs)).status).toBe('running');
  });
});
