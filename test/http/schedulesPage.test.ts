/**
 * The dashboard's schedules page (`GET /schedules`): every schedule with its next tick, paused
 * ones as paused, the schedule's text escaped; a remote caller without a token sees nothing.
 */
import { describe, expect, it } from 'vitest';
import { addSchedule } from '../../src/schedules/scheduleStore.js';
import { createTestSchema, type TestSchema } from '../helpers/db.js';
import { buildTestApp } from './helpers.js';

const html = { accept: 'text/html' };
const FLOW = { start: 'a', steps: { a: { tool: 'core.noop', done: true } } };

async function schedule(t: TestSchema, s: Parameters<typeof addSchedule>[2]): Promise<void> {
  const conn = await t.db.connect();
  try {
    await conn.query(`SET search_path TO ${t.schema}`);
    await addSchedule(conn, t.schema, s);
  } finally {
    conn.release();
  }
}

describe('the schedules page', () => {
  it('says how to add one when there is none, and the header links to it', async () => {
    const t = await createTestSchema();
    const { request } = buildTestApp(t);
    const res = await request('/schedules', { headers: html });
    expect(res.status).toBe(200);
    const body = await res.text();
    expect(body).toContain('No schedules. Add one with <code>stepd schedule add NAME --cron EXPR --flow FLOW</code>');
    expect(await (await request('/', { headers: html })).text()).toContain('<a href="/schedules">schedules</a>');
  });

  it('lists each schedule with its next tick, a paused one as paused, and escapes what a client wrote', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(FLOW)]);
    const evil = '<script>alert(1)</script>';
    await schedule(t, { name: 'nightly', cron: '0 2 * * *', tz: 'Europe/Paris', flow: 'report', input: { note: evil }, createdBy: `<i>${evil}</i>`, catchUp: 'latest' });
    await schedule(t, { name: 'hourly', cron: '0 * * * *', tz: 'UTC', flow: 'report', input: {}, createdBy: null, overlap: 'skip' });
    await t.q(`UPDATE stepd.schedules SET paused = true WHERE name = 'hourly'`);
    const { request } = buildTestApp(t);
    const body = await (await request('/schedules', { headers: html })).text();
    expect([...body.matchAll(/data-schedule="([^"]+)"/g)].map((m) => m[1])).toEqual(['hourly', 'nightly']);
    const rowOf = (name: string) => body.slice(body.indexOf(`data-schedule="${name}"`), body.indexOf('</tr>', body.indexOf(`data-schedule="${name}"`)));
    expect(rowOf('hourly')).toContain('paused');
    expect(rowOf('hourly')).toContain('overlap skip');
    expect(rowOf('nightly')).toMatch(/<time datetime="\d{4}-\d\d-\d\dT\d\d:00:00\.000Z">/);
    expect(rowOf('nightly')).toContain('catch-up latest');
    expect(rowOf('nightly')).toContain('<a href="/?name=report"');
    expect(body).not.toContain('<script>alert');
    expect(body).not.toContain('<i>');
    expect(body).toContain('&lt;i&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;/i&gt;');
  });

  it('is not shown to a remote caller without a token', async () => {
    const t = await createTestSchema();
    const { request } = buildTestApp(t);
    const res = await request('/schedules', { headers: html }, '203.0.113.9');
    expect(res.status).not.toBe(200);
    expect(await res.text()).not.toContain('Schedules');
  });
});
