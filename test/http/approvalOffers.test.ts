/**
 * The dashboard's approvals UX (issue 26): no approve/reject buttons for a user the gate's
 * approvers would refuse, the gate's approval.schema shown to the approver, a parent's page
 * labelling its child's gate with that child, and sub-workflows nested under their parent in the
 * list (not top-level rows). The real app on the real database, an executor in-process.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForStep } from '../helpers/db.js';
import { buildTestApp } from './helpers.js';

const html = { accept: 'text/html' };
const SCHEMA = { type: 'object', required: ['budget'], properties: { budget: { type: 'integer' } } };

describe('dashboard approvals', () => {
  it('offers approve and reject only to an approver, with the schema; tells anyone else who may', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: { approval: { approvers: ['dana'], schema: SCHEMA }, next: 'b' }, b: { tool: 'core.echo', args: {} } } });
    const gate = await waitForStep(t, id, 'ask', 'pending');

    const asDana = await (await buildTestApp(t, { localUser: 'dana' }).request(`/workflows/${id}`, { headers: html })).text();
    const danaGate = section(asDana, gate.id);
    expect(danaGate).toContain(`/workflows/${id}/steps/${gate.id}/approve`);
    expect(danaGate).toContain('data-gate-schema');
    expect(danaGate).toContain('&quot;required&quot;: [');
    expect(danaGate).not.toContain('data-gate-not-yours');

    const asEve = await (await buildTestApp(t, { localUser: 'eve' }).request(`/workflows/${id}`, { headers: html })).text();
    const eveGate = section(asEve, gate.id);
    expect(eveGate).toContain('data-gate-not-yours');
    expect(eveGate).toContain('You (eve) may not approve or reject this gate: it waits for dana.');
    expect(eveGate).not.toContain('/approve"');
    expect(eveGate).not.toContain('/reject"');
    expect(eveGate).not.toContain('data-gate-schema');
  });

  it("labels a child's gate on the parent's page and nests the child under its parent in the list", async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('review', $1)`, [JSON.stringify({ start: 'ok', steps: { ok: { approval: true, next: 'say' }, say: { tool: 'core.echo', args: {} } } })]);
    await startExecutor(t);
    const lone = await insertWorkflow(t, { start: 'a', steps: { a: { approval: true, next: 'b' }, b: { tool: 'core.echo', args: {} } } }, {}, { name: 'lone' });
    const parent = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'review' } } } }, {}, { name: 'outer' });
    const child = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE parent_id = $1`, [parent]))[0], 'the child');
    const gate = await waitForStep(t, child.id, 'ok', 'pending');
    const newer = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: {} } } }, {}, { name: 'newer' });
    const { request } = buildTestApp(t);

    const page = await (await request(`/workflows/${parent}`, { headers: html })).text();
    const g = section(page, gate.id);
    expect(g).toContain(`data-gate-workflow-id="${child.id}"`);
    expect(g).toMatch(new RegExp(`in sub-workflow <a href="/workflows/${child.id}">${child.id}</a> \\(review\\)`));

    const list = await (await request('/', { headers: html })).text();
    const rows = [...list.matchAll(/<tr data-workflow-id="(\d+)"[^>]*?(?: class="sub" data-parent-id="(\d+)" data-depth="(\d+)")?>/g)].map((m) => [m[1], m[2] ?? null, m[3] ?? null]);
    // Newest top-level first; the child right under its parent, never as a row of its own.
    expect(rows).toEqual([
      [newer, null, null],
      [parent, null, null],
      [child.id, parent, '1'],
      [lone, null, null],
    ]);
  });
});

/** The gate's section of a page. */
function section(page: string, stepId: string): string {
  const start = page.indexOf(`data-gate-step-id="${stepId}"`);
  expect(start, 'the gate is on the page').toBeGreaterThan(-1);
  return page.slice(start, page.indexOf('</section>', start));
}
