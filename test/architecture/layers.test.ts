/**
 * The layers of the interfaces (docs/architecture.md, "The interfaces"): the CLI, the dashboard
 * (HTTP) and the MCP server each stand on `src/api/` and none imports another; what starts the
 * servers (`src/daemon/`) is above them, and only the program's entry imports the CLI. Every
 * import of src/**\/*.ts is read (static, `import type`, `export … from` and `import()`: TypeScript 7
 * has no JavaScript API to ask, so they are matched line by line), so a forbidden edge fails here
 * with the file and the import that make it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(ROOT, 'src');

/** The top folder of a file under src/ (`cli`, `api`…), or '' for a file directly in src/ (src/cli.ts). */
function folderOf(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  return parts.length > 1 ? parts[0]! : '';
}

/** Which folders a folder may not import, and why. */
const FORBIDDEN: { from: string; to: string[]; why: string }[] = [
  { from: 'api', to: ['cli', 'http', 'mcpServer', 'daemon'], why: 'the operations and their views are below every interface' },
  { from: 'http', to: ['cli', 'mcpServer', 'daemon'], why: 'the dashboard stands on api/ only (the daemon mounts /mcp beside it)' },
  { from: 'mcpServer', to: ['cli', 'http', 'daemon'], why: 'the MCP server stands on api/ only' },
  { from: 'cli', to: ['http', 'mcpServer'], why: 'the CLI starts the servers through src/daemon/' },
  { from: 'daemon', to: ['cli'], why: 'the composition roots are started by the CLI, not the other way round' },
];

interface ImportEdge {
  file: string;
  specifier: string;
  target: string;
}

/**
 * A statement that starts a line with `import` or `export` and names a module with `from` (over
 * several lines too), a bare `import 'x'`, and every `import('x')` (dynamic, or a type written
 * `import('x').T`). Comment lines start with `//` or `*`, so they do not match the first two.
 */
const IMPORT_PATTERNS = [
  /^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*['"]([^'"]+)['"]/gm,
  /^[ \t]*import\s*['"]([^'"]+)['"]/gm,
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
];

/** The relative imports of one file, resolved to the .ts files they name. */
function importsOf(file: string, text: string): ImportEdge[] {
  const specifiers = IMPORT_PATTERNS.flatMap((re) => [...text.matchAll(re)].map((m) => m[1]!));
  return specifiers
    .filter((spec) => spec.startsWith('.'))
    .map((specifier) => ({ file, specifier, target: path.resolve(path.dirname(file), specifier.replace(/\.js$/, '.ts')) }));
}

/** Each forbidden edge as `file imports 'specifier' (from → to: why)`. */
function forbiddenEdges(edges: readonly ImportEdge[]): string[] {
  const problems: string[] = [];
  for (const e of edges) {
    const from = folderOf(e.file);
    const to = folderOf(e.target);
    if (from === to) continue;
    const rel = path.relative(ROOT, e.file);
    const rule = FORBIDDEN.find((r) => r.from === from && r.to.includes(to));
    if (rule) problems.push(`${rel} imports '${e.specifier}' (${from}/ → ${to}/: ${rule.why})`);
    // Only the program's entry (src/cli.ts) loads the CLI: src/lib/, src/worker/, src/notify/… never.
    else if (to === 'cli' && from !== '') problems.push(`${rel} imports '${e.specifier}' (${from}/ → cli/: only src/cli.ts imports the CLI)`);
  }
  return problems;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const full = path.join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(full);
    return d.name.endsWith('.ts') && !d.name.endsWith('.d.ts') ? [full] : [];
  });
}

describe('the layers of the interfaces', () => {
  const edges = sourceFiles(SRC).flatMap((file) => importsOf(file, readFileSync(file, 'utf8')));

  it('no forbidden import between cli/, http/, mcpServer/, api/ and daemon/', () => {
    expect(forbiddenEdges(edges)).toEqual([]);
  });

  it('reads every kind of import, so an empty answer means something', () => {
    const at = (file: string) => path.join(SRC, file);
    // A dynamic import (the command loads the daemon only when it runs) and a type import.
    expect(edges).toContainEqual({ file: at('cli/start.ts'), specifier: '../daemon/startDaemon.js', target: at('daemon/startDaemon.ts') });
    expect(edges.some((e) => e.file === at('api/operationTypes.ts') && e.target === at('api/views/statusView.ts'))).toBe(true);
    const sample = [
      "import type { StatusView } from '../cli/statusView.js';",
      "export { x } from '../http/app.js';",
      "const m = await import('../mcpServer/render.js');",
    ].join('\n');
    expect(forbiddenEdges(importsOf(at('api/example.ts'), sample))).toEqual([
      "src/api/example.ts imports '../cli/statusView.js' (api/ → cli/: the operations and their views are below every interface)",
      "src/api/example.ts imports '../http/app.js' (api/ → http/: the operations and their views are below every interface)",
      "src/api/example.ts imports '../mcpServer/render.js' (api/ → mcpServer/: the operations and their views are below every interface)",
    ]);
    expect(forbiddenEdges(importsOf(at('lib/example.ts'), "import { out } from '../cli/common.js';"))).toEqual([
      "src/lib/example.ts imports '../cli/common.js' (lib/ → cli/: only src/cli.ts imports the CLI)",
    ]);
    expect(forbiddenEdges(importsOf(at('cli.ts'), "import { buildProgram } from './cli/program.js';"))).toEqual([]);
  });
});
