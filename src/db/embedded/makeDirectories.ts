/**
 * `mkdir -p` without Node's `fs.mkdir(…, { recursive: true })`, which loops for ever (burning
 * CPU) when a folder's parent exists but refuses it with ENOENT, as `/proc` does: each missing
 * folder is made once, from the top, and any refusal is thrown as it came.
 */
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { errCode } from './helpers.js';

/** Makes `dir` and its missing parents; a no-op when it is a folder already. */
export async function makeDirectories(dir: string): Promise<void> {
  const target = path.resolve(dir);
  try {
    await fs.mkdir(target);
    return;
  } catch (err) {
    if (errCode(err) === 'EEXIST') return refuseUnlessDirectory(target, err);
    const parent = path.dirname(target);
    // ENOENT with the parent there (or at the root) is the refusal itself: not a missing parent to make.
    if (errCode(err) !== 'ENOENT' || parent === target || (await isDirectory(parent))) throw err;
    await makeDirectories(parent);
  }
  try {
    await fs.mkdir(target);
  } catch (err) {
    if (errCode(err) !== 'EEXIST') throw err;
    await refuseUnlessDirectory(target, err);
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  return (await fs.stat(dir).catch(() => undefined))?.isDirectory() ?? false;
}

async function refuseUnlessDirectory(dir: string, err: unknown): Promise<void> {
  if (await isDirectory(dir)) return;
  throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}' (a file of that name is in the way)`), { code: 'ENOTDIR', cause: err });
}
