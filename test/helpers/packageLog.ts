/**
 * Records which npm packages a child node process loads: `--import <importFlag>` installs a module
 * resolve hook that appends each package name to a log; `loaded()` reads it back.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface PackageLog {
  /** The value for node's `--import`. */
  importFlag: string;
  loaded(): Promise<Set<string>>;
}

export async function packageLog(dir: string): Promise<PackageLog> {
  const log = path.join(dir, 'resolved.txt');
  const hooks = path.join(dir, 'hooks.mjs');
  await writeFile(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(spec, ctx, next) {
  const r = await next(spec, ctx);
  const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(r.url);
  if (m) appendFileSync(${JSON.stringify(log)}, m[1] + '\\n');
  return r;
}`,
  );
  const register = path.join(dir, 'register.mjs');
  await writeFile(register, `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(hooks).href)});`);
  return {
    importFlag: pathToFileURL(register).href,
    loaded: async () => new Set((await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean)),
  };
}
