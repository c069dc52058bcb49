/**
 * The workflow page's flow graph and attempts timeline, served by the app over a real schema
 * with a real executor: hostile names stay text, the page's Content-Security-Policy and its one
 * script are unchanged, the live refresh (the fragment) carries the pictures, a sub-workflow's box
 * links to its child, and a flow of 2,000 steps is cut to what is drawn, saying so.
 */
import { describe, expect, it } from 'vitest';
import { MAX_GRAPH_NODES } from '../../src/flow/flowGraph.js';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { buildTestApp } from './helpers.js';

const html = { accept: 'text/html' };
const EVIL = '<script>alert(1)</script>';

describe('flow graph and timeline on the workflow page', () => {
  it('draws hostile step names as text, in the page and in its live refresh, under the same CSP', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const attr = '"><img src=x onerror=alert(2)>';
    const flow = {
      start: EVIL,
      steps: {
        [EVIL]: { tool: 'core.echo', args: { v: 1 }, next: attr },
        [attr]: { tool: 'core.fail', args: { code: 'x"><svg onload=alert(3)>', message: EVIL } },
      },
    };
    const id = await insertWorkflow(t, flow, {}, { name: EVIL });
    await waitForWorkflow(t, id);
    const { request } = buildTestApp(t);
    const res = await request(`/workflows/${id}`, { headers: html });
    const body = await res.text();
    const fragment = await (await request(`/workflows/${id}`, { headers: { ...html, 'x-stepd-fragment': '1' } })).text();
    for (const text of [body, fragment]) {
      expect(text).toContain('id="flow-graph"');
      expect(text).toContain('id="timeline"');
      expect(text).not.toContain('<script>alert');
      expect(text).not.toContain('<img src=x');
      expect(text).not.toContain('<svg onload');
      expect(text).toContain('data-step="&lt;script&gt;alert(1)&lt;/script&gt;" data-state="done"');
      expect(text).toContain('data-step="&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" data-state="failed"');
    }
    // One script, the page's own (with the nonce); no style attribute for the CSP to refuse.
    expect([...body.matchAll(/<script/g)]).toHaveLength(1);
    expect(body).not.toMatch(/\sstyle="/);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toMatch(/^default-src 'none'; script-src 'nonce-[^']+'; style-src 'nonce-[^']+';/);
    expect(csp).not.toContain('unsafe-inline');
  });

  it("links a sub-workflow step's box to its child's page", async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('review', $1)`, [JSON.stringify({ start: 'ok', steps: { ok: { approval: true } } })]);
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'review' } } } }, {}, { name: 'outer' });
    const child = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [id]))[0], 'the child');
    await waitForStep(t, child.id, 'ok', 'pending');
    const { request } = buildTestApp(t);
    const parent = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(parent).toMatch(new RegExp(`<a href="/workflows/${child.id}" class="node-link"><g class="node st-waiting nk-workflow start" data-step="sub"`));
    expect(parent).toContain('child running');
    const page = await (await request(`/workflows/${child.id}`, { headers: html })).text();
    expect(page).toContain('data-step="ok" data-state="waiting" data-kind="gate"');
  });

  it('cuts a flow of 2,000 steps to the first steps from the start and says so', async () => {
    const t = await createTestSchema();
    const steps: Record<string, unknown> = {};
    for (let i = 0; i < 2000; i++) steps[`step_${i}`] = { tool: 'core.echo', args: { i }, ...(i < 1999 ? { next: `step_${i + 1}` } : { done: true }) };
    const id = await insertWorkflow(t, { start: 'step_0', steps }, {}, { name: 'huge' });
    const { request } = buildTestApp(t);
    const body = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(body).toContain(`Showing the first ${MAX_GRAPH_NODES} of 2000 steps`);
    expect([...body.matchAll(/<g class="node /g)]).toHaveLength(MAX_GRAPH_NODES);
    expect(body).toContain('data-step="step_0"');
    expect(body).not.toContain(`data-step="step_${MAX_GRAPH_NODES}"`);
  });

  it('says why a flow that does not compile cannot be drawn, and still lists its rows', async () => {
    const t = await createTestSchema();
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', next: '<nowhere>' } } }, {}, { name: 'broken' });
    const { request } = buildTestApp(t);
    const body = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(body).toMatch(/<p class="muted" id="flow-graph-problem">The flow cannot be drawn: steps\.a\.next: [^<]*&lt;nowhere&gt;[^<]*\.<\/p>/);
    expect(body).not.toContain('id="flow-graph"');
    expect(body).toContain('<h3>Steps</h3>');
  });
});
