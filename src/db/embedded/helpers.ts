/** Small helpers of the embedded PostgreSQL: files, text, error codes, waiting. */
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export async function logTail(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'postgres.log');
  return lastLines(await readFrom(file, Math.max(0, (await fileSize(file)) - 4096)), 15);
}

export async function readFrom(file: string, offset: number): Promise<string> {
  const handle = await fs.open(file, 'r').catch(() => undefined);
  if (!handle) return '';
  try {
    const size = (await handle.stat()).size;
    if (size <= offset) return '';
    const buffer = Buffer.alloc(Math.min(size - offset, 64 * 1024));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, Math.max(offset, size - buffer.length));
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

export async function fileSize(file: string): Promise<number> {
  return (await fs.stat(file).catch(() => undefined))?.size ?? 0;
}

export async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

export async function realpathOr(file: string): Promise<string> {
  return fs.realpath(file).catch(() => path.resolve(file));
}

export function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}

export function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join('\n');
}

export function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

export function errCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, onTimeout: () => Promise<Error>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw await onTimeout();
    await sleep(50);
  }
}
