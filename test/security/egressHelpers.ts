/**
 * What the egress attack tests share: a one-step flow calling `http.request`, starting one
 * workflow per URL as the client role and reading each one's failed-step error, the check that
 * each was refused with `egress_denied` on its only attempt, and this machine's own addresses.
 */
import { networkInterfaces } from 'node:os';
import { expect } from 'vitest';
import { clientInsert, failedStepError, getSteps, waitForWorkflow, type SecurityEnv } from './helpers.js';

export function callFlow(url: string): unknown {
  return {
    start: 'call',
    steps: { call: { tool: 'http.request', args: { url, timeout: '2s' }, retry: { maxAttempts: 1 }, timeout: '5s', done: true, output: '{{result}}' } },
  };
}

export interface CallError {
  url: string;
  code: string;
  retryable: unknown;
  attempts: number;
  message: string;
  details: Record<string, unknown> | undefined;
}

/** Starts one workflow per URL as the client and returns each one's failed-step error. */
export async function errorsFor(env: SecurityEnv, urls: string[]): Promise<CallError[]> {
  const ids = await Promise.all(urls.map((url) => clientInsert(env.client, callFlow(url))));
  const out: CallError[] = [];
  for (const [i, id] of ids.entries()) {
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, `${urls[i]}: ${JSON.stringify(wf.output)}`).toBe('failed');
    const error = await failedStepError(env.t, id);
    const details = error.details as Record<string, unknown> | undefined;
    out.push({ url: urls[i]!, code: error.code, retryable: error.retryable, attempts: (await getSteps(env.t, id)).length, message: error.message, details });
  }
  return out;
}

export function expectDenied(errors: CallError[]): void {
  for (const e of errors) expect({ url: e.url, code: e.code, retryable: e.retryable, attempts: e.attempts }).toEqual({ url: e.url, code: 'egress_denied', retryable: false, attempts: 1 });
}

/** This machine's own addresses that are not loopback (nor link-local, which a URL cannot scope), by family. */
export function ownAddresses(): { v4: string[]; v6: string[] } {
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const external = all.filter((i) => !i.internal && !i.address.toLowerCase().startsWith('fe80:'));
  return { v4: external.filter((i) => i.family === 'IPv4').map((i) => i.address), v6: external.filter((i) => i.family === 'IPv6').map((i) => i.address) };
}
