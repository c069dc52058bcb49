import { describe, expect, it } from 'vitest';
import { EventHub } from '../../src/http/eventHub.js';
import { createHttpApp } from '../../src/http/app.js';
import { Sessions } from '../../src/http/sessions.js';
import { createTokenLookup } from '../../src/api/tokens.js';
import { silentLogger } from '../../src/logger.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { buildTestApp, formPost, gatedFlow } from './helpers.js';
import { AuthThrottle } from '../../src/http/authThrottle.js';

const html = { accept: 'text/html' };

describe('dashboard pages', () => {
  it('escapes hostile names, errors, arguments and results', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const evil = '<script>alert(1)</script>';
    const flow = {
      start: 'a',
      steps: {
        a: { tool: 'core.echo', args: { x: `"><img src=x onerror=alert(2)>` }, next: 'b' },
        b: { tool: 'core.fail', args: { code: 'boom', message: `<b onmouseover=alert(3)>${evil}</b>` } },
      },
    };
    const id = await insertWorkflow(t, flow, { note: evil }, { name: evil, user: `<i>${evil}</i>` });
    await waitForWorkflow(t, id);
    const { request } = buildTestApp(t);
    for (const path of ['/', `/workflows/${id}`]) {
      const body = await (await request(path, { headers: html })).text();
      expect(body, path).not.toContain('<script>alert');
      expect(body, path).not.toContain('<img src=x');
      expect(body, path).not.toContain('<b onmouseover');
      expect(body, path).not.toContain('<i>');
      expect(body, path).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    }
    const page = await request(`/workflows/${id}`, { headers: html });
    // Only the page's own script and style run: the CSP allows nothing without the nonce.
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'nonce-[^']+'/);
    expect(page.headers.get('content-security-policy')).not.toContain('unsafe-inline');
  });

  it('filters the list by status, name, user and creation time', async () => {
    const t = await createTestSchema();
    const done = { start: 'a', steps: { a: { tool: 'core.echo', args: {} } } };
    await startExecutor(t);
    const a = await insertWorkflow(t, done, {}, { name: 'alpha', user: 'alice' });
    const b = await insertWorkflow(t, gatedFlow, {}, { name: 'beta', user: 'bob' });
    await waitForWorkflow(t, a);
    await waitForStep(t, b, 'review', 'pending');
    const { request } = buildTestApp(t);
    const ids = async (query: string) => {
      const body = await (await request(`/?${query}`, { headers: html })).text();
      return [...body.matchAll(/data-workflow-id="(\d+)"/g)].map((m) => m[1]);
    };
    expect(await ids('')).toEqual([b, a]);
    expect(await ids('status=running')).toEqual([b]);
    expect(await ids('status=completed')).toEqual([a]);
    expect(await ids('name=alpha')).toEqual([a]);
    expect(await ids('user=bob')).toEqual([b]);
    const created = (await t.q<{ created_at: Date }>(`SELECT created_at FROM stepd.workflows WHERE id = $1`, [b]))[0]!.created_at;
    const minute = new Date(created).toISOString().slice(0, 16);
    expect(await ids(`since=${minute}`)).toContain(b);
    expect(await ids(`until=${minute}`)).not.toContain(b);

    const bad = await request('/?status=bogus&since=yesterday', { headers: html });
    expect(bad.status).toBe(400);
    const text = await bad.text();
    expect(text).toContain('status must be one of new, running, completed, failed, cancelled');
    expect(text).toContain('since must be a date and time');
  });

  it('shows a waiting gate with its message, and cancel refuses a finished workflow with the CLI wording', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    // carol's own workflow: a user may cancel and retry only the workflows it started (or any, listed in api.admins).
    const id = await insertWorkflow(t, gatedFlow, {}, { name: 'release', user: 'carol' });
    const step = await waitForStep(t, id, 'review', 'pending');
    const { request, sessions } = buildTestApp(t, { localUser: 'carol' });
    const body = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(body).toContain(`data-gate-step-id="${step.id}"`);
    expect(body).toContain('<div class="message">Ship it?</div>');
    expect(body).toContain(`action="/workflows/${id}/cancel"`);

    const csrf = sessions.csrfToken('carol');
    expect((await request(`/workflows/${id}/cancel`, formPost({ csrf }))).status).toBe(303);
    expect((await waitForWorkflow(t, id)).status).toBe('cancelled');
    const again = await request(`/workflows/${id}/cancel`, formPost({ csrf }));
    expect(again.status).toBe(409);
    expect(await again.text()).toContain(`workflow ${id} (release) is already cancelled; only a new or running workflow can be cancelled`);

    const missing = await request('/workflows/999999', { headers: html });
    expect(missing.status).toBe(404);
  });

  it('approves a gate with a JSON result from the form, and refuses a result that is not JSON', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, gatedFlow, {}, { user: 'alice' });
    const step = await waitForStep(t, id, 'review', 'pending');
    const { request, sessions } = buildTestApp(t, { localUser: 'carol' });
    const path = `/workflows/${id}/steps/${step.id}/approve`;
    const csrf = sessions.csrfToken('carol');
    const bad = await request(path, formPost({ csrf, data: '{"approved": tru' }));
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('the result is not valid JSON');
    expect((await request(path, formPost({ csrf, data: '{"approved": true, "budget": 500}' }))).status).toBe(303);
    const review = await waitForStep(t, id, 'review', 'done');
    expect(review).toMatchObject({ readied_by: 'carol', result: { approved: true, budget: 500 } });
  });

  it("shows a gate's rendered approval.message and the refusal of an approval that did not count", async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: 'ask',
      steps: {
        ask: { approval: { message: 'Spend {{input.amount}} EUR on <b>{{input.what}}</b>?', approvers: ['boss'] }, next: 'buy' },
        buy: { tool: 'core.echo', args: {} },
      },
    };
    const id = await insertWorkflow(t, flow, { amount: 120, what: 'GPUs' });
    const step = await waitForStep(t, id, 'ask', 'pending');
    // Another service readies it as someone who is not an approver: the executor refuses it.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', readied_by = 'mallory' WHERE id = $1`, [step.id]);
    await waitFor(async () => (await getSteps(t, id)).find((s) => s.name === 'ask' && s.status === 'pending' && s.error), 'the refusal');
    const { request } = buildTestApp(t, { localUser: 'carol' });
    const body = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(body).toContain('<div class="message">Spend 120 EUR on &lt;b&gt;GPUs&lt;/b&gt;?</div>');
    expect(body).toContain('approvers: boss');
    expect(body).toContain('You (carol) may not approve or reject this gate: it waits for boss.');
    expect(body).toMatch(/data-gate-refusal>\[approval_refused\] approval refused: [^<]*mallory/);
  });

  it('retries a failed workflow with the button, and refuses one that did not fail', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { code: 'boom' } } } }, {}, { name: 'flaky', user: 'carol' });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    const { request, sessions } = buildTestApp(t, { localUser: 'carol' });
    const page = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(page).toContain(`action="/workflows/${id}/retry"`);
    const csrf = sessions.csrfToken('carol');
    expect((await request(`/workflows/${id}/retry`, formPost({ csrf }))).status).toBe(303);
    await waitFor(async () => (await getSteps(t, id)).filter((s) => s.name === 'a').length === 2, 'a second attempt of the failed step');

    const done = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: {} } } }, {}, { name: 'fine', user: 'carol' });
    await waitForWorkflow(t, done);
    const refused = await request(`/workflows/${done}/retry`, formPost({ csrf }));
    expect(refused.status).toBe(409);
    expect(await refused.text()).toContain(`workflow ${done} (fine) is completed; only a failed workflow can be redriven`);
  });

  it('shows every attempt of a retried step with its number and error', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = { start: 'a', steps: { a: { tool: 'core.fail', args: { code: 'flaky', message: 'try again', retryable: true }, retry: { maxAttempts: 2, initial: '10ms' } } } };
    const id = await insertWorkflow(t, flow);
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    const { request } = buildTestApp(t);
    const body = await (await request(`/workflows/${id}`, { headers: html })).text();
    const rows = [...body.matchAll(/<li data-step-id="\d+" data-step-name="a" data-status="failed">[\s\S]*?<\/li>/g)].map((m) => m[0]);
    expect(rows).toHaveLength(2);
    expect(rows[1]).toContain('attempt 2/2');
    expect(rows[1]).toContain('<div class="error">[flaky] try again');
  });

  it("links a sub-workflow step to its child's page, where the child's gate waits", async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('review', $1)`, [
      JSON.stringify({ start: 'ok', steps: { ok: { approval: true, next: 'say' }, say: { tool: 'core.echo', args: { v: 1 } } } }),
    ]);
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'review' } } } }, {}, { name: 'outer' });
    const child = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [id]))[0], 'the child');
    const gate = await waitForStep(t, child.id, 'ok', 'pending');
    const { request } = buildTestApp(t);
    const parent = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(parent).toContain(`sub-workflow <a href="/workflows/${child.id}">${child.id}</a>`);
    expect(parent).toContain(`waiting for sub-workflow ${child.id}`);
    expect(parent).not.toMatch(/data-step-name="sub"[^>]*>[\s\S]*?waiting for approval since/);
    const page = await (await request(`/workflows/${child.id}`, { headers: html })).text();
    expect(page).toContain(`data-gate-step-id="${gate.id}"`);
  });

  it('nests fan-out rows under their fork by item', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.xs}}', step: 'work' }, join: 'end' },
        work: { tool: 'core.echo', args: { x: '{{item}}' } },
        end: { tool: 'core.echo', args: { all: '{{results}}' }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, { xs: ['p', 'q'] });
    const wf = await waitForWorkflow(t, id);
    const { request } = buildTestApp(t);
    const body = await (await request(`/workflows/${id}`, { headers: html })).text();
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(body).toMatch(/data-step-name="each"[\s\S]*data-branch="0"[\s\S]*data-step-name="work"[\s\S]*data-branch="1"[\s\S]*data-step-name="work"/);
  });

  it('mounts /mcp with the request user and /metrics', async () => {
    const t = await createTestSchema();
    const seen: string[] = [];
    const { request } = buildTestApp(t, {
      localUser: 'dave',
      mcp: async (req, user) => {
        seen.push(`${req.method} ${user}`);
        return Response.json({ ok: true });
      },
      metrics: async () => new Response('stepd_up 1\n', { headers: { 'content-type': 'text/plain' } }),
    });
    expect((await request('/mcp', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(200);
    expect(seen).toEqual(['POST dave']);
    expect((await request('/mcp', { method: 'POST', headers: { origin: 'https://evil.example', 'content-type': 'application/json' }, body: '{}' })).status).toBe(403);
    expect(await (await request('/metrics')).text()).toBe('stepd_up 1\n');
  });
});

describe('live updates', () => {
  it('streams the workflow events as Server-Sent Events', async () => {
    const t = await createTestSchema();
    const hub = new EventHub({ url: t.url, schema: t.schema, log: silentLogger() });
    await hub.start();
    onCleanup(() => hub.close());
    const app = createHttpApp({ auth: { tokens: createTokenLookup(undefined), localUser: 'erin', sessions: new Sessions(), throttle: new AuthThrottle() }, log: silentLogger(), events: hub });
    const id = await insertWorkflow(t, gatedFlow);
    const res = await app.request(`/events?workflow=${id}`, {}, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    onCleanup(async () => void (await reader.cancel().catch(() => {})));
    let text = '';
    const read = async (pattern: RegExp) => {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before ${pattern}: ${text}`);
        text += new TextDecoder().decode(value);
      }
    };
    await read(/event: ready/);
    await startExecutor(t);
    await read(/"type":"step\.waiting"/);
    expect(text).toMatch(/event: stepd\ndata: \{[^\n]*"workflowId":"\d+"/);
    expect(hub.subscribers).toBe(1);
  });
});
