/**
 * No import cycle in src/, and the executor's folders drawn one way (docs/architecture.md).
 *
 * The graph is read from the text of every src/**\/*.ts (importGraph.ts): static `import … from`,
 * `import '…'` and `export … from`; dynamic `import()` is not an edge (a deliberate late load).
 *
 * - src/executor/: every import counts, `import type` too, between files and between its folders
 *   (core/, transitions/, admission/, claims/, steps/, outcomes/, wakeups/, supervision/, and the
 *   files at its root that wire them): the folders are the architecture, and a circle of types is
 *   a circle a reader has to follow all the same.
 * - all of src/: every import too, `import type` included. TypeScript erases a type import, so it
 *   cannot make a module load before its dependency has finished, but it is a dependency a reader
 *   follows all the same. The type-only circles that were left (the spec's and the compiled flow's
 *   types in src/flow/, src/configFile.ts ↔ src/tools/permissions.ts ↔ src/tools/rates.ts, the
 *   dashboard's pages and actions) were cut by moving the shared type or function into a small
 *   file both sides import (src/flow/keyedConcurrency.ts, compiledSignalWait.ts, capacityHint.ts,
 *   src/tools/matchesToolPattern.ts, src/http/dashboard/dashboardDeps.ts).
 *
 * KNOWN_CYCLES: cycles tolerated for now (none today; keep it so). A cycle passes only if all its
 * files are inside one known entry, so a new file joining it, or any new cycle, fails. Delete an
 * entry once its cycle is gone (this test prints the entries that no longer match anything).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildImportGraph, cycleEdges, findCycles, groupGraph, importSpecifiers, type ImportGraph } from './importGraph.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const KNOWN_CYCLES: string[][] = [];

function report(graph: ImportGraph, cycles: string[][]): string {
  return cycles.map((c) => `cycle of ${c.length}: ${c.join(', ')}\n  ${cycleEdges(graph, c).join('\n  ')}`).join('\n');
}

/** `src/executor/claims/slots.ts` → `claims`; a file at the executor's root → `(root)`. */
function executorFolder(file: string): string | undefined {
  if (!file.startsWith('src/executor/')) return undefined;
  const parts = file.split('/');
  return parts.length > 3 ? parts[2] : '(root)';
}

describe('the import graph', () => {
  it('reads imports, exports from, side-effect imports and type-only imports; not comments or dynamic imports', () => {
    const text = [
      "import { a,",
      "  b } from './multi.js';",
      "import type { T } from './types.js';",
      "import { type U, type V } from './inlineTypes.js';",
      "import { type W, x } from './mixed.js';",
      "export * from './star.js';",
      "export type { X } from './reexportedType.js';",
      "import './sideEffect.js';",
      "import pg from 'pg';",
      " * import { c } from './inComment.js';",
      "const m = await import('./dynamic.js');",
    ].join('\n');
    expect(importSpecifiers(text)).toEqual([
      { spec: './multi.js', typeOnly: false },
      { spec: './types.js', typeOnly: true },
      { spec: './inlineTypes.js', typeOnly: true },
      { spec: './mixed.js', typeOnly: false },
      { spec: './star.js', typeOnly: false },
      { spec: './reexportedType.js', typeOnly: true },
      { spec: './sideEffect.js', typeOnly: false },
    ]);
  });

  it('finds each cycle with its files, and the edges inside it', () => {
    const graph: ImportGraph = { edges: new Map([
      ['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['a', 'd'])], ['d', new Set<string>()], ['e', new Set(['e'])],
    ]) };
    expect(findCycles(graph)).toEqual([['a', 'b', 'c'], ['e']]);
    expect(cycleEdges(graph, ['a', 'b', 'c'])).toEqual(['a → b', 'b → c', 'c → a']);
  });
});

describe('no import cycle', () => {
  it('between the files of src/executor/, type imports included', () => {
    const graph = buildImportGraph(ROOT, 'src/executor');
    expect(graph.edges.size).toBeGreaterThan(40);
    const cycles = findCycles(graph);
    expect(report(graph, cycles)).toBe('');
  });

  it('between the folders of src/executor/, type imports included', () => {
    const folders = groupGraph(buildImportGraph(ROOT, 'src/executor'), executorFolder);
    expect([...folders.edges.keys()].sort()).toEqual(['(root)', 'admission', 'claims', 'core', 'outcomes', 'steps', 'supervision', 'transitions', 'wakeups']);
    expect(report(folders, findCycles(folders))).toBe('');
    // The shared floor imports no other part of the executor; the files at the root (the wiring) are imported by none.
    expect([...folders.edges.get('core')!]).toEqual([]);
    for (const [folder, imports] of folders.edges) if (folder !== '(root)') expect(imports.has('(root)'), `${folder} imports the executor's root`).toBe(false);
  });

  it('in src/, type imports included (all but the known cycles, none today)', () => {
    const graph = buildImportGraph(ROOT, 'src');
    expect(graph.edges.size).toBeGreaterThan(200);
    const cycles = findCycles(graph);
    const known = (c: string[]) => KNOWN_CYCLES.some((k) => c.every((f) => k.includes(f)));
    expect(report(graph, cycles.filter((c) => !known(c)))).toBe('');
    const stale = KNOWN_CYCLES.filter((k) => !cycles.some((c) => c.every((f) => k.includes(f))));
    if (stale.length > 0) console.log(`KNOWN_CYCLES entries that match no cycle any more (delete them): ${JSON.stringify(stale)}`);
  });
});
