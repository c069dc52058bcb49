/** The benchmark's output: a table on stdout and bench-results/latest.json (+ a dated copy). */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BenchEnvironment } from './environment.js';
import { busyWarning } from './machineLoad.js';
import { spread } from './stats.js';
import { computeFigures, type Figure, type RunResult } from './figures.js';
import type { StepdRunResult, StepdScenario } from './stepdRun.js';
import type { StatementKind } from './statementStats.js';
import type { ScaleResult } from './scale.js';
import { SCENARIOS, type BenchSettings } from './settings.js';

function num(v: number, unit: string): string {
  if (!Number.isFinite(v)) return '—';
  if (unit === '/s') return Math.round(v).toLocaleString('en-US');
  if (unit === '×') return `${v.toFixed(2)}×`;
  const abs = Math.abs(v);
  return abs >= 100 ? Math.round(v).toLocaleString('en-US') : abs >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function ratio(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '' : `${v >= 10 ? v.toFixed(1) : v.toFixed(2)}×`;
}

/** Checkpoints during a scenario over its runs: "0", "1 (run 2)", or "—" when not measured. */
export function checkpointsIn(perRun: readonly (number | undefined)[]): string {
  const known = perRun.flatMap((n, i) => (n === undefined ? [] : [{ n, run: i + 1 }]));
  if (known.length === 0) return '—';
  const met = known.filter((k) => k.n > 0);
  const total = met.reduce((sum, k) => sum + k.n, 0);
  return met.length === 0 ? '0' : `${total} (run ${met.map((k) => k.run).join(', ')})`;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max([...h].length, ...rows.map((r) => [...(r[i] ?? '')].length)));
  const line = (cells: string[]) => cells.map((c, i) => c + ' '.repeat(widths[i]! - [...c].length)).join('  ').trimEnd();
  return [line(header), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const KIND_ORDER: StatementKind[] = ['admit', 'claim', 'record', 'create', 'events', 'read', 'tx', 'other'];

/** The executors' own accounting per step (bench --accounting), from the last run. */
function formatAccounting(last: StepdRunResult | undefined, scenarios: StepdScenario[]): string[] {
  if (!last || !scenarios.some((k) => last.resources[k]?.accounting)) return [];
  const rows: string[][] = [];
  for (const k of scenarios) {
    const a = last.resources[k]?.accounting;
    const n = stepsOf(last, k);
    const wall = last.resources[k]?.wallMs;
    if (!a || !n || !wall) continue;
    rows.push([
      k,
      `${a.claims} (${(a.stepsClaimed / Math.max(1, a.claims)).toFixed(1)} steps each)`,
      `${(a.claimMs / Math.max(1, a.claims)).toFixed(2)} ms`,
      `${((a.claimMs / wall) * 100).toFixed(0)} %`,
      `${a.outcomeTransactions} (${(a.outcomesRecorded / Math.max(1, a.outcomeTransactions)).toFixed(1)} each)`,
      `${(a.outcomeTxMs / Math.max(1, a.outcomeTransactions)).toFixed(2)} ms`,
      `${((a.outcomeTxMs / wall) * 100).toFixed(0)} %`,
      `${(a.stepMs / Math.max(1, a.stepsEnded)).toFixed(2)} ms`,
    ]);
  }
  return [
    `  the executor's own accounting (${last.build}, its /metrics, last run): claims and outcome transactions, their mean`,
    '  duration and their share of the scenario\'s wall time (both run concurrently with each other and with the tools),',
    '  and a step attempt\'s mean time from claim to outcome',
    '',
    table(['stepd scenario', 'claims', 'claim mean', 'claims ÷ wall', 'outcome txs', 'tx mean', 'txs ÷ wall', 'step mean'], rows).replace(/^/gm, '  '),
    '',
  ];
}

const STEPD_SCENARIOS: StepdScenario[] = ['throughput', 'sustained', 'chain', 'fanout', 'fanoutFirst', 'wakeup', 'signals', 'gateRace', 'fanoutLarge', 'io', 'workers', 'keyed'];

/** Step rows each scenario moved through the executor (fan-out: the fork, the items, the join). */
export function stepsOf(r: StepdRunResult, k: StepdScenario): number | undefined {
  switch (k) {
    case 'throughput': return r.throughput?.steps;
    case 'sustained': return r.sustained?.steps;
    case 'chain': return r.chain?.steps;
    case 'fanout': return r.fanout ? r.fanout.items + 2 : undefined;
    case 'fanoutFirst': return r.fanoutFirst ? r.fanoutFirst.items + 2 : undefined;
    case 'fanoutLarge': return r.fanoutLarge ? r.fanoutLarge.items + 2 : undefined;
    case 'wakeup': return r.wakeup?.gates;
    case 'signals': return r.signals ? r.signals.signals * 2 : undefined;
    case 'gateRace': return r.gateRace ? r.gateRace.gates * 2 : undefined;
    case 'io': return r.io?.steps;
    case 'keyed': return r.keyed?.steps;
    case 'workers': return r.workers ? r.workers.steps + 2 * r.workers.chain.steps : undefined;
  }
}

/**
 * The executor's statements per step (pg_stat_statements, when the server tracks it), from the
 * last run: top-level statements, explicit transactions, commits, server time, trigger statements,
 * and the costliest statements of each scenario.
 */
function formatStatements(last: StepdRunResult | undefined, scenarios: StepdScenario[]): string[] {
  if (!last || !scenarios.some((k) => last.resources[k]?.statements)) return [];
  const rows: string[][] = [];
  const kindRows: string[][] = [];
  const tops: string[] = [];
  for (const k of scenarios) {
    const st = last.resources[k]?.statements;
    const n = stepsOf(last, k);
    if (!st || !n) continue;
    const per = (v: number, d = 2) => (v / n).toFixed(d);
    kindRows.push([
      k,
      ...KIND_ORDER.map((kind) => {
        const x = st.byKind[kind];
        return x ? `${per(x.ms, 3)} (${per(x.calls)})` : '';
      }),
      st.activeMs !== undefined ? `${per(st.activeMs, 3)} ms` : '',
      st.idleInTransactionMs !== undefined ? `${per(st.idleInTransactionMs, 3)} ms` : '',
    ]);
    rows.push([k, per(st.calls), per(st.transactions), per(st.commits), `${per(st.execMs, 3)} ms`, per(st.nestedCalls), `${per(st.nestedMs, 3)} ms`]);
    tops.push(`  ${k}: the executor's costliest statements (calls per step, server ms per step)`);
    for (const l of st.top.slice(0, 6)) tops.push(`    ${per(l.calls).padStart(6)}  ${(l.totalMs / n).toFixed(3).padStart(7)}  ${l.query.slice(0, 110)}`);
    for (const l of st.topNested.slice(0, 3)) tops.push(`    ${per(l.calls).padStart(6)}  ${(l.totalMs / n).toFixed(3).padStart(7)}  (in a trigger) ${l.query.slice(0, 95)}`);
  }
  return [
    `  what the executor (${last.build}) asked of PostgreSQL, per step (pg_stat_statements, last run): top-level statements, BEGINs,`,
    '  commits, their server time (triggers included), statements inside triggers and their time',
    '',
    table(['stepd scenario', 'statements', 'BEGINs', 'commits', 'server time', 'in triggers', 'trigger time'], rows).replace(/^/gm, '  '),
    '',
    '  server time per step by what the statements are for (calls per step in parentheses); sessions: time PostgreSQL spent',
    '  executing (harness included) and idle inside the executor\'s transactions, waiting for it',
    '',
    table(['stepd scenario', ...KIND_ORDER, 'active', 'idle in tx'], kindRows).replace(/^/gm, '  '),
    '',
    ...tops,
    '',
  ];
}

/**
 * bench --compare: the stepd figures of this tree beside those of the compared ref, medians of
 * the same runs (the two builds alternate within each run), and their ratio.
 */
function formatComparison(runs: RunResult[]): string[] {
  const pairs = runs.filter((r) => r.compared);
  if (pairs.length === 0) return [];
  const mine = computeFigures(pairs, undefined);
  const theirs = computeFigures(pairs.map((r) => ({ ...r, stepd: r.compared! })), undefined);
  const label = pairs[0]!.compared!.build;
  const rows: string[][] = [];
  // Every figure either build produced (one may have failed a scenario), in the table's order.
  const keys = [...new Set([...mine, ...theirs].map((x) => x.key))];
  for (const key of keys) {
    const f = mine.find((x) => x.key === key) ?? theirs.find((x) => x.key === key)!;
    if (f.section.endsWith('peers')) continue;
    const m = mine.find((x) => x.key === key);
    const o = theirs.find((t) => t.key === key);
    const a = m?.value.median ?? Number.NaN;
    const b = o?.value.median ?? Number.NaN;
    const vals = (fig: Figure | undefined) => (fig ? fig.value.values.map((v) => num(v, fig.unit)).join(' · ') : '');
    rows.push([f.section, f.label, `${num(a, f.unit)} ${f.unit}`.trim(), vals(m), `${num(b, f.unit)} ${f.unit}`.trim(), vals(o), Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : '']);
  }
  return [
    `  side by side (medians of ${pairs.length} run(s), the builds alternating in each): this tree vs ${label}`,
    '',
    table(['scenario', 'measure', 'this tree', 'runs', label, 'runs', 'this ÷ that'], rows).replace(/^/gm, '  '),
    '',
  ];
}

export function formatReport(opts: {
  figures: Figure[];
  env: BenchEnvironment;
  settings: BenchSettings;
  runs: RunResult[];
  scale: ScaleResult | undefined;
  durationSeconds: number;
}): string {
  const { figures, env, settings } = opts;
  const rows: string[][] = [];
  let section = '';
  for (const f of figures) {
    const value = f.value.values.length === 0 ? '—' : `${num(f.value.median, f.unit)} ${f.unit === '×' ? '' : f.unit}`.trim();
    const range = f.value.values.length > 1 ? `${num(f.value.min, f.unit)} – ${num(f.value.max, f.unit)}` : '';
    rows.push([
      f.section === section ? '' : f.section,
      f.label,
      value,
      range,
      ratio(f.vsFloor),
      ratio(f.vsCeiling),
      ratio(f.vsPgBoss),
      f.target ? `${f.target.met ? '✓' : '✗'} ${f.target.text}` : '',
      f.note ?? '',
    ]);
    section = f.section;
  }
  const s = settings.sizes;
  const pg = env.postgres;
  const scenarios = STEPD_SCENARIOS.filter((k) => opts.runs.some((r) => r.stepd.resources[k]));
  const resourceRows = scenarios.map((k) => {
    const med = (get: (r: RunResult) => number | undefined, digits: number, unit: string) => {
      const v = spread(opts.runs.map(get)).median;
      return Number.isFinite(v) ? `${v.toFixed(digits)} ${unit}` : '—';
    };
    return [
      k,
      med((r) => (r.stepd.resources[k]?.wallMs ?? Number.NaN) / 1000, 1, 's'),
      med((r) => r.stepd.resources[k]?.executorCpuPercent, 0, '%'),
      med((r) => r.stepd.resources[k]?.machineBusyPercent, 0, '%'),
      med((r) => {
        const res = r.stepd.resources[k];
        const n = stepsOf(r.stepd, k);
        return res && n ? (res.executorCpuPercent / 100) * res.wallMs / n : undefined;
      }, 2, 'ms'),
      med((r) => {
        const res = r.stepd.resources[k];
        const n = stepsOf(r.stepd, k);
        return res?.postgresCpuSeconds !== undefined && n ? (res.postgresCpuSeconds * 1000) / n : undefined;
      }, 2, 'ms'),
      med((r) => {
        const n = stepsOf(r.stepd, k);
        return n ? (r.stepd.resources[k]?.executorWrites ?? Number.NaN) / n : undefined;
      }, 1, ''),
      checkpointsIn(opts.runs.map((r) => r.stepd.resources[k]?.checkpoints)),
    ];
  });
  const lastRun = opts.runs[opts.runs.length - 1];
  const statementLines = [
    ...formatStatements(lastRun?.stepd, STEPD_SCENARIOS),
    ...formatStatements(lastRun?.compared, STEPD_SCENARIOS),
    ...formatAccounting(lastRun?.stepd, STEPD_SCENARIOS),
    ...formatAccounting(lastRun?.compared, STEPD_SCENARIOS),
  ];
  const warning = busyWarning(opts.runs.flatMap((r) => [r.load.before, r.load.after]));
  const ceilingTool = opts.runs[0]?.ceiling[0]?.tool ?? 'n/a';
  const lines = [
    '',
    `stepd benchmark — ${env.date}${settings.quick ? '  (BENCH_QUICK: reduced sizes)' : ''}${settings.profileDir ? `  (BENCH_PROFILE: executor profiled into ${settings.profileDir}; figures not comparable)` : ''}`,
    `  runs: ${opts.runs.length} (median, min – max)   sizes: throughput ${s.throughput}, chain ${s.chain}, fan-out ${s.fanout}, gates ${s.gates}, finished rows ${s.scaleRows.toLocaleString('en-US')}, io ${s.io}×3 (concurrency ${settings.ioConcurrency}), large fan-out ${s.fanoutLarge}, floor ${s.floor} and ${s.floorHops} hops`,
    ...(settings.only.length < SCENARIOS.length ? [`  only: ${settings.only.join(', ')}`] : []),
    `  machine: ${env.machine.cpus} CPU (${env.machine.cpuModel}), ${env.machine.memoryGiB} GiB, Linux ${env.machine.kernel}; node ${env.node}; commit ${env.commit ?? 'unknown'}`,
    `  PostgreSQL ${pg.server_version}: synchronous_commit=${pg.synchronous_commit} fsync=${pg.fsync} shared_buffers=${pg.shared_buffers} max_connections=${pg.max_connections} work_mem=${pg.work_mem} jit=${pg.jit}`,
    `  stepd executor: its own process, default settings; ceiling via ${ceilingTool}; claim statement from ${opts.scale?.statementSource ?? 'n/a'}`,
    '',
    table(['scenario', 'measure', 'median', 'min – max', '÷ floor', '÷ ceiling', '÷ pg-boss', 'target', 'note'], rows),
    '',
    '  where the time went (medians): wall time of the scenario, the executor process\'s CPU (100 % = one core),',
    `  the whole machine's CPU (100 % = all ${env.machine.cpus} cores busy: PostgreSQL, the harness, anything else),`,
    '  executor CPU per step, the CPU of the PostgreSQL backends serving the executor\'s connections per step (/proc, by',
    '  client port; not the server\'s background processes), executor write syscalls per step (≈ database round trips per step),',
    '  and the PostgreSQL checkpoints that began during the scenario, in all its runs (after one, full page images swell the',
    '  WAL of the next writes: a run that met one reads slow)',
    '',
    table(['stepd scenario', 'wall', 'executor CPU', 'machine busy', 'CPU/step', 'PG CPU/step', 'writes/step', 'checkpoints'], resourceRows).replace(/^/gm, '  '),
    '',
    ...statementLines,
    ...formatComparison(opts.runs),
    ...(warning ? [`  ${warning}`, ''] : []),
    ...opts.runs.flatMap((r, i) => [...r.stepd.errors, ...r.errors].map((e) => `  ✗ run ${i + 1}: ${e.scenario} failed: ${e.message.split('\n')[0]}`)),
    '  ÷ floor / ÷ ceiling / ÷ pg-boss: the figure divided by the same figure of the peer in the same run (median of runs);',
    '  for rates higher is better, for times lower is better. Ceiling per transition = 1000 / (1-client transitions/s) ms.',
    '  chain hop = completed_at(i+1) − completed_at(i); handoff = started_at(i+1) − completed_at(i) (database clock).',
    '  fan-out items/s ÷ pg-boss: against pg-boss\'s no-op jobs/s. wake-up = the gate\'s started_at − readied_at (the readying',
    '  UPDATE\'s transaction time): includes that UPDATE\'s own commit. claim: the executor\'s claim statement (limit = its default',
    '  concurrency) on two schemas that differ only in the finished rows, alternating claim by claim, each rolled back.',
    ...(opts.runs.some((r) => r.floor) ? [
      `  floor: the row work of a one-step workflow alone (batches of ${opts.runs.find((r) => r.floor)!.floor!.batch}, a transaction per half) and of a chain hop (a transaction`,
      '  each), in one server-side DO loop, on bare tables of stepd\'s columns and on stepd\'s schema as the executor role; the faster',
      '  of two passes each. ÷ floor is against stepd\'s schema (for CPU per workflow: the floor\'s backend CPU per workflow).',
      '  No NOTIFYs, reads or guards of the executor\'s statements in it.',
    ] : []),
    `  total time: ${opts.durationSeconds.toFixed(0)} s`,
    '',
  ];
  return lines.join('\n');
}

/** Writes the dated file, and latest.json unless `updateLatest` is false (a quick or profiled run). */
export function writeResults(outDir: string, result: unknown, date: string, updateLatest: boolean): string[] {
  mkdirSync(outDir, { recursive: true });
  const dated = path.join(outDir, `bench-${date.replace(/[:.]/g, '-')}.json`);
  const json = `${JSON.stringify(result, null, 2)}\n`;
  writeFileSync(dated, json);
  if (!updateLatest) return [dated];
  const latest = path.join(outDir, 'latest.json');
  writeFileSync(latest, json);
  return [latest, dated];
}
