/**
 * bench --compare REF: the code of another commit, built where it cannot touch the working tree.
 * `git archive REF` is unpacked into a folder of the system temp directory named after the
 * commit (kept and reused by later runs: a build takes a while), node_modules is linked to this
 * tree's, and TypeScript compiles it there (type errors are printed but do not stop it, as with
 * `npm run build`). Nothing is checked out, stashed or committed; git only reads.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Build } from './stepdRun.js';

const run = promisify(execFile);

export async function prepareOtherBuild(ref: string, progress: (msg: string) => void): Promise<Build> {
  const repo = (await run('git', ['rev-parse', '--show-toplevel'])).stdout.trim();
  const sha = (await run('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: repo })).stdout.trim();
  const dir = path.join(os.tmpdir(), `stepd-bench-${sha.slice(0, 12)}`);
  const cli = path.join(dir, 'dist', 'src', 'cli.js');
  const label = `${ref} (${sha.slice(0, 7)})`;
  if (existsSync(cli)) {
    progress(`compare: reusing the build of ${label} in ${dir}`);
    return { label, cli };
  }
  progress(`compare: building ${label} in ${dir}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await run('sh', ['-c', 'git archive --format=tar "$1" | tar -x -C "$2"', 'archive', sha, dir], { cwd: repo, maxBuffer: 1 << 26 });
  symlinkSync(path.join(repo, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  try {
    await run(path.join(repo, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], { cwd: dir, maxBuffer: 1 << 26 });
  } catch (err) {
    if (!existsSync(cli)) throw new Error(`building ${label} failed: ${(err as Error).message.split('\n').slice(0, 5).join(' ')}`);
    progress(`compare: ${label} built with type errors (emitted anyway)`);
  }
  return { label, cli };
}
