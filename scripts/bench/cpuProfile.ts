/**
 * Where the executor's CPU went, from a V8 `.cpuprofile` (BENCH_PROFILE=1 writes one per
 * executor process): self time summed by function and by source file (this repository's files
 * by their path under src/, dependencies by package, Node's own by `node:`), most first.
 * Also runnable on its own: `node dist/scripts/bench/cpuProfile.js FILE.cpuprofile`.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface CpuShare {
  name: string;
  ms: number;
  percent: number;
}

export interface CpuSummary {
  /** Sampled time, ms (idle included). */
  totalMs: number;
  /** Sampled time not idle, ms. */
  busyMs: number;
  byFile: CpuShare[];
  byFunction: CpuShare[];
}

/** A short name for where code lives: src/executor/x.ts, pg, node:internal, (gc), … */
export function codeArea(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  const own = /\/dist\/(src\/.*?)\.js$/.exec(url);
  if (own) return `${own[1]}.ts`;
  if (url.startsWith('node:')) return url.startsWith('node:internal') ? 'node:internal' : url;
  return url.replace(/^file:\/\//, '');
}

export function summarizeCpuProfile(profile: CpuProfile, top = 15): CpuSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMs = new Map<number, number>();
  if (profile.samples && profile.timeDeltas) {
    for (let i = 0; i < profile.samples.length; i++) {
      const id = profile.samples[i]!;
      selfMs.set(id, (selfMs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
    }
  }
  const totalMs = (profile.endTime - profile.startTime) / 1000;
  const files = new Map<string, number>();
  const functions = new Map<string, number>();
  let idleMs = 0;
  for (const [id, ms] of selfMs) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    if (functionName === '(idle)' || functionName === '(program)') {
      if (functionName === '(idle)') idleMs += ms;
      if (functionName === '(idle)') continue;
    }
    const area = codeArea(url, functionName);
    files.set(area, (files.get(area) ?? 0) + ms);
    const fn = `${functionName || '(anonymous)'} ${area}${url ? `:${lineNumber + 1}` : ''}`;
    functions.set(fn, (functions.get(fn) ?? 0) + ms);
  }
  const busyMs = totalMs - idleMs;
  const rank = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, ms]) => ({ name, ms, percent: (ms / busyMs) * 100 }));
  return { totalMs, busyMs, byFile: rank(files), byFunction: rank(functions) };
}

export function summarizeCpuProfileFile(path: string, top?: number): CpuSummary {
  return summarizeCpuProfile(JSON.parse(readFileSync(path, 'utf8')) as CpuProfile, top);
}

export function formatCpuSummary(s: CpuSummary, title: string): string[] {
  const line = (c: CpuShare) => `    ${c.percent.toFixed(1).padStart(5)} %  ${c.ms.toFixed(0).padStart(6)} ms  ${c.name}`;
  return [
    `  ${title}: ${s.busyMs.toFixed(0)} ms busy of ${s.totalMs.toFixed(0)} ms sampled; self time by file, then by function`,
    ...s.byFile.map(line),
    '',
    ...s.byFunction.map(line),
    '',
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const file of process.argv.slice(2)) process.stdout.write(`${formatCpuSummary(summarizeCpuProfileFile(file, 25), file).join('\n')}\n`);
}
