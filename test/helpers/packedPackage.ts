/**
 * The package as a user gets it: `npm pack` of this checkout (the built dist/, with
 * --ignore-scripts: the tests build first), unpacked into node_modules/stepd of a new project in
 * a temp folder. Its dependencies are those already installed for this checkout, linked one by
 * one into the project's node_modules (npm's cache holds no registry metadata offline, and a
 * network install would be slow): a flat install, as npm would lay it out.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, realpath, rename, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tempDirSync } from './isolation.js';

const run = promisify(execFile);
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface PackedProject {
  /** The project folder: package.json and node_modules (stepd unpacked, its dependencies linked). */
  dir: string;
  /** The files the tarball holds (paths inside the package). */
  files: string[];
}

export async function installPackedPackage(): Promise<PackedProject> {
  if (!existsSync(path.join(REPO_ROOT, 'dist/src/lib/index.js'))) throw new Error('dist/ is missing: build first (sh scripts/node22.sh npx tsc -p tsconfig.json)');
  const dir = tempDirSync('stepd-packed-');
  const packDir = path.join(dir, 'pack');
  await mkdir(packDir);
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', packDir], { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 });
  const packed = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  const tarball = path.join(packDir, path.basename(packed[0]!.filename));
  const project = path.join(dir, 'project');
  const modules = path.join(project, 'node_modules');
  await mkdir(modules, { recursive: true });
  await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  await run('tar', ['-xzf', tarball, '-C', modules]);
  await rename(path.join(modules, 'package'), path.join(modules, 'stepd'));
  // Everything installed for the checkout but stepd itself (which links back to the checkout).
  const installed = await realpath(path.join(REPO_ROOT, 'node_modules'));
  for (const name of await readdir(installed)) {
    if (name === 'stepd' || name.startsWith('.')) continue;
    if (name.startsWith('@')) {
      await mkdir(path.join(modules, name), { recursive: true });
      for (const inner of await readdir(path.join(installed, name))) {
        await symlink(path.join(installed, name, inner), path.join(modules, name, inner));
      }
    } else {
      await symlink(path.join(installed, name), path.join(modules, name));
    }
  }
  return { dir: project, files: packed[0]!.files.map((f) => f.path) };
}
