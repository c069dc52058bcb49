/**
 * The static import graph of src/: which file imports which, read from the text of each file
 * (`import … from`, `import '…'`, `export … from`; `import type` counted too, see below), and
 * its cycles (strongly connected components, Tarjan). No I/O beyond reading the files.
 *
 * Type-only imports are counted like the others: they cost nothing at run time, but they are
 * dependencies a reader follows all the same, and a circle of types is the first step of a
 * circle of code. Dynamic `import()` is not counted: it is how a caller loads a heavy part late
 * (the CLI loads the executor only for `stepd start`), an edge taken at run time on purpose.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** `import x from '…'`, `import { a, type B } from '…'`, `export * from '…'`, `export type { A } from '…'`, `import '…'`. */
const STATEMENT = /^(?:import|export)\s+(type\s+)?([\w\s{},*$]*?\s*from\s*)?['"]([^'"]+)['"]/gm;

export interface ImportGraph {
  /** File (relative to the root, forward slashes) → the files of the graph it imports. */
  edges: Map<string, Set<string>>;
}

export function listTsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...listTsFiles(full));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** The relative specifiers a file's text imports (`./x.js`, `../y/z.js`); `typeOnly`: `import type` / `export type`, or braces holding only `type` names. */
export function importSpecifiers(text: string): { spec: string; typeOnly: boolean }[] {
  const found: { spec: string; typeOnly: boolean }[] = [];
  for (const m of text.matchAll(STATEMENT)) {
    const spec = m[3]!;
    if (!spec.startsWith('.')) continue;
    const names = /^\s*\{([^}]*)\}\s*from/.exec(m[2] ?? '')?.[1]?.split(',').map((n) => n.trim()).filter((n) => n !== '');
    const typeOnly = m[1] !== undefined || (names !== undefined && names.length > 0 && names.every((n) => n.startsWith('type ')));
    found.push({ spec, typeOnly });
  }
  return found;
}

/** The graph of every .ts file under `root`/`dir`, names relative to `root` (type-only imports included). */
export function buildImportGraph(root: string, dir: string): ImportGraph {
  const files = listTsFiles(path.join(root, dir)).map((f) => path.relative(root, f).split(path.sep).join('/'));
  const known = new Set(files);
  const edges = new Map<string, Set<string>>();
  for (const file of files) {
    const targets = new Set<string>();
    for (const { spec } of importSpecifiers(readFileSync(path.join(root, file), 'utf8'))) {
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts');
      if (known.has(resolved)) targets.add(resolved);
    }
    edges.set(file, targets);
  }
  return { edges };
}

/** The graph with each node replaced by `group(node)`; edges inside one group dropped. */
export function groupGraph(graph: ImportGraph, group: (file: string) => string | undefined): ImportGraph {
  const edges = new Map<string, Set<string>>();
  for (const [from, tos] of graph.edges) {
    const g = group(from);
    if (g === undefined) continue;
    const set = edges.get(g) ?? new Set<string>();
    edges.set(g, set);
    for (const to of tos) {
      const h = group(to);
      if (h !== undefined && h !== g) set.add(h);
    }
  }
  return { edges };
}

/** Every cycle of the graph as the sorted nodes of its strongly connected component (size > 1, or a node importing itself). */
export function findCycles(graph: ImportGraph): string[][] {
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    indexOf.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.edges.get(v) ?? []) {
      if (!indexOf.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, indexOf.get(w)!));
      }
    }
    if (low.get(v) === indexOf.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.edges.get(v)?.has(v)) cycles.push(component.sort());
    }
  };
  for (const v of [...graph.edges.keys()].sort()) if (!indexOf.has(v)) visit(v);
  return cycles;
}

/** The edges inside one cycle, `a → b`, so a report shows where to cut. */
export function cycleEdges(graph: ImportGraph, cycle: string[]): string[] {
  const inside = new Set(cycle);
  const out: string[] = [];
  for (const from of cycle) for (const to of graph.edges.get(from) ?? []) if (inside.has(to)) out.push(`${from} → ${to}`);
  return out;
}
