/** Shared helpers for the tool tests: a silent logger, step contexts, waiting on conditions. */
import { readFileSync } from 'node:fs';
import { pino, type Logger } from 'pino';
import type { ToolContext } from '../../src/tools/tool.js';

export function silentLogger(): Logger {
  return pino({ level: process.env.STEPD_TEST_LOG_LEVEL ?? 'silent' });
}

let nextStep = 1;

/** A step context; pass `signal` to control aborts. */
export function stepContext(overrides: Partial<ToolContext> = {}): ToolContext {
  const stepId = String(nextStep++);
  return {
    workflowId: '7',
    stepId,
    stepName: 'step',
    attempt: 1,
    user: 'james',
    idempotencyKey: `7:step:${stepId}`,
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** Polls `condition` until it returns a truthy value (returned) or the time runs out. */
export async function waitFor<T>(condition: () => T | Promise<T>, what: string, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export type LoggedEvent = { event: string; pid: number; [key: string]: unknown };

/** The JSON lines a stdio test server wrote to its STEPD_TEST_LOG file. */
export function readEvents(file: string): LoggedEvent[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as LoggedEvent);
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves to the error a promise rejected with; fails when it resolved. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (err) {
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected the promise to reject');
}
