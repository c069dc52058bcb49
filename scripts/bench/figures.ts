/**
 * The figures of the report: each a named value read from one run, aggregated across runs
 * (median, min–max), with its ratios to the peers measured in the same run and its target.
 * Ratios are stepd ÷ peer, computed run by run and then the median taken: for rates higher is
 * better, for times lower is better.
 */
import type { CeilingResult } from './ceiling.js';
import type { FloorResult } from './floor.js';
import type { LoadSample } from './machineLoad.js';
import type { PgBossResult } from './pgboss.js';
import { claimRatios, type ScaleResult } from './scale.js';
import { spread, type Spread } from './stats.js';
import type { StepdRunResult } from './stepdRun.js';

export interface RunResult {
  stepd: StepdRunResult;
  /** The same stepd scenarios with the code of the compared ref (bench --compare). */
  compared?: StepdRunResult;
  /** Scenario 0: the row work alone, bare and on stepd's schema. */
  floor?: FloorResult;
  ceiling: CeilingResult[];
  pgboss?: PgBossResult;
  /** Peer measurements that failed (the stepd ones are in stepd.errors). */
  errors: { scenario: string; message: string }[];
  /** The machine's load before and after the run. */
  load: { before: LoadSample; after: LoadSample };
}

export interface Target {
  text: string;
  met: (value: number, ratios: { ceiling?: number; pgboss?: number }) => boolean;
}

export interface Figure {
  key: string;
  section: string;
  label: string;
  unit: string;
  value: Spread;
  /** Against the floor on stepd's schema (scenario 0), same run. */
  vsFloor?: number;
  vsCeiling?: number;
  vsPgBoss?: number;
  target?: { text: string; met: boolean };
  note?: string;
}

type Getter = (r: RunResult) => number | undefined;

interface FigureDef {
  key: string;
  section: string;
  label: string;
  unit: string;
  get: Getter;
  /** Same-run floor figure (stepd's schema) to divide by. */
  floor?: Getter;
  /** Same-run ceiling figure to divide by (1 client). */
  ceiling?: Getter;
  pgboss?: Getter;
  target?: Target;
  timedOut?: (r: RunResult) => boolean | undefined;
}

const ceiling1: (r: RunResult) => CeilingResult | undefined = (r) => r.ceiling.find((c) => c.clients === 1);
const ceilingTps: Getter = (r) => ceiling1(r)?.transitionsPerSec;
const ceilingMsPerTransition: Getter = (r) => (ceiling1(r) ? 1000 / ceiling1(r)!.transitionsPerSec : undefined);

export const GRAPHILE_WORKER_JOBS_PER_SEC = 17_900;

const floorRate: Getter = (r) => r.floor?.stepd.workflowsPerSec;
const floorHopMs: Getter = (r) => r.floor?.stepd.hopMs;
/** The floor's own backend CPU per workflow on stepd's schema: what the row work alone costs the server. */
const floorPostgresMs: Getter = (r) => r.floor?.stepd.postgresMsPerWorkflow;
const over = (a: Getter, b: Getter): Getter => (r) => {
  const x = a(r);
  const y = b(r);
  return x === undefined || y === undefined || y === 0 ? undefined : x / y;
};

/** CPU ms per workflow of a one-step scenario: the executor process's, or its PostgreSQL backends'. */
function cpuMsPerWorkflow(k: 'throughput' | 'sustained', who: 'executor' | 'postgres'): Getter {
  return (r) => {
    const res = r.stepd.resources[k];
    const n = r.stepd[k]?.workflows;
    if (!res || !n) return undefined;
    const seconds = who === 'executor' ? (res.executorCpuPercent / 100) * (res.wallMs / 1000) : res.postgresCpuSeconds;
    return seconds === undefined ? undefined : (seconds * 1000) / n;
  };
}
const sum = (a: Getter, b: Getter): Getter => (r) => {
  const x = a(r);
  const y = b(r);
  return x === undefined || y === undefined ? undefined : x + y;
};
const pgbossCpu = (k: 'throughput' | 'sustained', who: 'client' | 'postgres'): Getter => (r) =>
  who === 'client' ? r.pgboss?.[k]?.clientCpuMsPerJob : r.pgboss?.[k]?.postgresCpuMsPerJob;

const FLOOR_DEFS: FigureDef[] = [
  { key: 'floor.bareWorkflowsPerSec', section: '0 floor', label: 'row work alone, bare tables: workflows/s', unit: '/s', get: (r) => r.floor?.bare.workflowsPerSec },
  { key: 'floor.stepdWorkflowsPerSec', section: '0 floor', label: "row work alone, stepd's schema as the executor: workflows/s", unit: '/s', get: floorRate },
  { key: 'floor.schemaShare', section: '0 floor', label: "stepd's schema ÷ bare", unit: '×', get: over(floorRate, (r) => r.floor?.bare.workflowsPerSec) },
  { key: 'floor.throughputVsBare', section: '0 floor', label: 'scenario 1 workflows/s ÷ bare floor', unit: '×', get: over((r) => r.stepd.throughput?.workflowsPerSec, (r) => r.floor?.bare.workflowsPerSec) },
  { key: 'floor.throughputVsStepd', section: '0 floor', label: "scenario 1 workflows/s ÷ schema floor", unit: '×', get: over((r) => r.stepd.throughput?.workflowsPerSec, floorRate) },
  { key: 'floor.pgbossVsBare', section: '0 floor', label: 'pg-boss jobs/s ÷ bare floor', unit: '×', get: over((r) => r.pgboss?.throughput.jobsPerSec, (r) => r.floor?.bare.workflowsPerSec) },
  { key: 'floor.pgbossVsStepd', section: '0 floor', label: 'pg-boss jobs/s ÷ schema floor', unit: '×', get: over((r) => r.pgboss?.throughput.jobsPerSec, floorRate) },
  { key: 'floor.barePostgresMs', section: '0 floor', label: 'bare: PostgreSQL CPU per workflow', unit: 'ms', get: (r) => r.floor?.bare.postgresMsPerWorkflow },
  { key: 'floor.stepdPostgresMs', section: '0 floor', label: "stepd's schema: PostgreSQL CPU per workflow", unit: 'ms', get: (r) => r.floor?.stepd.postgresMsPerWorkflow },
  { key: 'floor.hopBareMs', section: '0 floor', label: 'chain hop alone (1 commit), bare', unit: 'ms', get: (r) => r.floor?.bare.hopMs },
  { key: 'floor.hopStepdMs', section: '0 floor', label: "chain hop alone (1 commit), stepd's schema", unit: 'ms', get: floorHopMs },
  { key: 'floor.hopStepdPostgresMs', section: '0 floor', label: "  its PostgreSQL CPU per hop", unit: 'ms', get: (r) => r.floor?.stepd.hopPostgresMs },
];

const CPU_DEFS = (k: 'throughput' | 'sustained', section: string): FigureDef[] => [
  { key: `${k}.executorCpuMsPerWorkflow`, section, label: 'CPU per workflow: executor (pg-boss: its client)', unit: 'ms', get: cpuMsPerWorkflow(k, 'executor'), pgboss: pgbossCpu(k, 'client') },
  {
    key: `${k}.postgresCpuMsPerWorkflow`, section, label: 'CPU per workflow: its PostgreSQL backends', unit: 'ms',
    get: cpuMsPerWorkflow(k, 'postgres'), floor: floorPostgresMs, pgboss: pgbossCpu(k, 'postgres'),
  },
  {
    key: `${k}.cpuMsPerWorkflow`, section, label: 'CPU per workflow: both', unit: 'ms',
    get: sum(cpuMsPerWorkflow(k, 'executor'), cpuMsPerWorkflow(k, 'postgres')), floor: floorPostgresMs, pgboss: sum(pgbossCpu(k, 'client'), pgbossCpu(k, 'postgres')),
  },
];

const DEFS: FigureDef[] = [
  ...FLOOR_DEFS,
  {
    key: 'throughput.stepsPerSec', section: '1 throughput', label: 'steps/s', unit: '/s',
    get: (r) => r.stepd.throughput?.stepsPerSec, ceiling: ceilingTps, pgboss: (r) => r.pgboss?.throughput.jobsPerSec,
    timedOut: (r) => r.stepd.throughput?.timedOut,
  },
  {
    key: 'throughput.workflowsPerSec', section: '1 throughput', label: 'workflows/s', unit: '/s',
    get: (r) => r.stepd.throughput?.workflowsPerSec, floor: floorRate, pgboss: (r) => r.pgboss?.throughput.jobsPerSec,
    target: { text: '≥ 0.5× pg-boss', met: (_v, x) => (x.pgboss ?? 0) >= 0.5 },
    timedOut: (r) => r.stepd.throughput?.timedOut,
  },
  ...CPU_DEFS('throughput', '1 throughput'),
  { key: 'throughput.stepsPerClaim', section: '1 throughput', label: 'steps per claim tx', unit: '', get: (r) => r.stepd.throughput?.batching.stepsPerClaim },
  { key: 'throughput.stepsPerCompletion', section: '1 throughput', label: 'steps per completion tx', unit: '', get: (r) => r.stepd.throughput?.batching.stepsPerCompletion },
  { key: 'throughput.workflowsPerAdmission', section: '1 throughput', label: 'workflows per admission tx', unit: '', get: (r) => r.stepd.throughput?.batching.workflowsPerAdmission },
  {
    key: 'sustained.workflowsPerSec', section: '1b sustained', label: 'workflows/s (five times as many)', unit: '/s',
    get: (r) => r.stepd.sustained?.workflowsPerSec, floor: floorRate, pgboss: (r) => r.pgboss?.sustained?.jobsPerSec,
    target: { text: '≥ 0.5× pg-boss', met: (_v, x) => (x.pgboss ?? 0) >= 0.5 },
    timedOut: (r) => r.stepd.sustained?.timedOut,
  },
  ...CPU_DEFS('sustained', '1b sustained'),
  {
    key: 'keyed.stepsPerSec', section: '9 keyed', label: 'steps/s (1,000 keys × limit 1)', unit: '/s',
    get: (r) => r.stepd.keyed?.stepsPerSec, timedOut: (r) => r.stepd.keyed?.timedOut,
  },
  { key: 'keyed.overlaps', section: '9 keyed', label: 'steps of one key at once (must be 0)', unit: '', get: (r) => r.stepd.keyed?.overlaps },
  { key: 'chain.totalMs', section: '2 chain', label: 'total', unit: 'ms', get: (r) => r.stepd.chain?.totalMs, pgboss: (r) => r.pgboss?.chain.totalMs, timedOut: (r) => r.stepd.chain?.timedOut },
  {
    key: 'chain.hopP50Ms', section: '2 chain', label: 'hop p50', unit: 'ms', get: (r) => r.stepd.chain?.hopMs.p50,
    floor: floorHopMs, ceiling: ceilingMsPerTransition, pgboss: (r) => r.pgboss?.chain.hopMs.p50,
    target: { text: '≤ 1.5 ms', met: (v) => v <= 1.5 }, timedOut: (r) => r.stepd.chain?.timedOut,
  },
  { key: 'chain.hopP99Ms', section: '2 chain', label: 'hop p99', unit: 'ms', get: (r) => r.stepd.chain?.hopMs.p99, pgboss: (r) => r.pgboss?.chain.hopMs.p99, timedOut: (r) => r.stepd.chain?.timedOut },
  { key: 'chain.hopMeanMs', section: '2 chain', label: 'hop mean', unit: 'ms', get: (r) => r.stepd.chain?.hopMs.mean, floor: floorHopMs, ceiling: ceilingMsPerTransition, pgboss: (r) => r.pgboss?.chain.hopMs.mean },
  { key: 'chain.handoffP50Ms', section: '2 chain', label: 'handoff p50 (done → next running)', unit: 'ms', get: (r) => r.stepd.chain?.handoffMs.p50 },
  {
    key: 'fanout.totalMs', section: '3 fan-out', label: 'total (forEach + join)', unit: 'ms', get: (r) => r.stepd.fanout?.totalMs,
    target: { text: '≤ 150 ms (1,000 items)', met: (v) => v <= 150 }, timedOut: (r) => r.stepd.fanout?.timedOut,
  },
  { key: 'fanout.itemsPerSec', section: '3 fan-out', label: 'items/s', unit: '/s', get: (r) => r.stepd.fanout?.itemsPerSec, ceiling: ceilingTps, pgboss: (r) => r.pgboss?.throughput.jobsPerSec },
  { key: 'fanout.startSpanMs', section: '3 fan-out', label: 'first → last item started', unit: 'ms', get: (r) => r.stepd.fanout?.phases?.startSpanMs },
  { key: 'fanout.startTxs', section: '3 fan-out', label: 'transactions starting items', unit: '', get: (r) => r.stepd.fanout?.phases?.startTxs },
  { key: 'fanout.completeTxs', section: '3 fan-out', label: 'transactions completing items', unit: '', get: (r) => r.stepd.fanout?.phases?.completeTxs },
  {
    key: 'fanoutFirst.totalMs', section: '3b fan-out + first', label: 'total (forEach + first + join)', unit: 'ms', get: (r) => r.stepd.fanoutFirst?.totalMs,
    timedOut: (r) => r.stepd.fanoutFirst?.timedOut,
  },
  { key: 'fanoutFirst.items', section: '3b fan-out + first', label: 'items done before the join cancelled the rest', unit: '', get: (r) => r.stepd.fanoutFirst?.items },
  {
    key: 'wakeup.p50Ms', section: '4 wake-up', label: 'readied → running p50', unit: 'ms', get: (r) => r.stepd.wakeup?.latencyMs.p50,
    ceiling: ceilingMsPerTransition, target: { text: '≤ 3 ms', met: (v) => v <= 3 }, timedOut: (r) => r.stepd.wakeup?.timedOut,
  },
  { key: 'wakeup.p99Ms', section: '4 wake-up', label: 'readied → running p99', unit: 'ms', get: (r) => r.stepd.wakeup?.latencyMs.p99, ceiling: ceilingMsPerTransition },
  { key: 'wakeup.updateP50Ms', section: '4 wake-up', label: '(the readying UPDATE round trip p50)', unit: 'ms', get: (r) => r.stepd.wakeup?.updateRoundTripMs.p50 },
  {
    key: 'signals.p50Ms', section: '4b signals', label: 'signal sent → next step running p50', unit: 'ms', get: (r) => r.stepd.signals?.latencyMs.p50,
    target: { text: '≤ 20 ms', met: (v) => v <= 20 }, timedOut: (r) => r.stepd.signals?.timedOut,
  },
  {
    key: 'signals.p99Ms', section: '4b signals', label: 'signal sent → next step running p99', unit: 'ms', get: (r) => r.stepd.signals?.latencyMs.p99,
    target: { text: '≤ 100 ms', met: (v) => v <= 100 }, timedOut: (r) => r.stepd.signals?.timedOut,
  },
  { key: 'signals.commitP50Ms', section: '4b signals', label: "(of which the sender's own commit p50)", unit: 'ms', get: (r) => r.stepd.signals?.commitMs?.p50 },
  { key: 'signals.afterCommitP50Ms', section: '4b signals', label: '(committed → next step running p50)', unit: 'ms', get: (r) => r.stepd.signals?.afterCommitMs?.p50 },
  { key: 'signals.afterCommitP99Ms', section: '4b signals', label: '(committed → next step running p99)', unit: 'ms', get: (r) => r.stepd.signals?.afterCommitMs?.p99 },
  { key: 'signals.waitP50Ms', section: '4b signals', label: '(signal sent → wait step running p50)', unit: 'ms', get: (r) => r.stepd.signals?.waitStartedMs.p50 },
  { key: 'signals.sendLagMs', section: '4b signals', label: '(sender behind its pace, worst)', unit: 'ms', get: (r) => r.stepd.signals?.sendLagMs },
  { key: 'signals.recordedMs', section: '4b signals', label: '(wait running → recorded done p50)', unit: 'ms', get: (r) => r.stepd.signals?.afterWaitMs?.recorded },
  { key: 'signals.nextCreatedMs', section: '4b signals', label: '(→ next step created p50)', unit: 'ms', get: (r) => r.stepd.signals?.afterWaitMs?.nextCreated },
  { key: 'signals.nextStartedMs', section: '4b signals', label: '(→ next step running p50)', unit: 'ms', get: (r) => r.stepd.signals?.afterWaitMs?.nextStarted },
  { key: 'signals.sentPerSecond', section: '4b signals', label: '(signals sent per second)', unit: '/s', get: (r) => r.stepd.signals?.sentPerSecond },
  {
    key: 'gateRace.p50Ms', section: '4c racing clients', label: 'readied → next step running p50', unit: 'ms', get: (r) => r.stepd.gateRace?.latencyMs.p50,
    target: { text: '≤ 50 ms', met: (v) => v <= 50 }, timedOut: (r) => r.stepd.gateRace?.timedOut,
  },
  { key: 'gateRace.p99Ms', section: '4c racing clients', label: 'readied → next step running p99', unit: 'ms', get: (r) => r.stepd.gateRace?.latencyMs.p99 },
  { key: 'gateRace.gateP50Ms', section: '4c racing clients', label: '(readied → gate running p50)', unit: 'ms', get: (r) => r.stepd.gateRace?.gateStartedMs.p50 },
  { key: 'executor.peakRssMiB', section: '5 scale', label: 'executor peak RSS', unit: 'MiB', get: (r) => r.stepd.peakRssMiB },
  { key: 'executor.idleCpuPercent', section: '5 scale', label: 'executor idle CPU', unit: '% core', get: (r) => r.stepd.idleCpuPercent, target: { text: '< 1%', met: (v) => v < 1 } },
  {
    key: 'io.stepsPerSec', section: '6 io 3×20 ms', label: 'steps/s', unit: '/s', get: (r) => r.stepd.io?.stepsPerSec,
    pgboss: (r) => r.pgboss?.throughput.jobsPerSec, timedOut: (r) => r.stepd.io?.timedOut,
  },
  {
    key: 'io.shareOfIdeal', section: '6 io 3×20 ms', label: 'share of ideal (concurrency ÷ 20 ms)', unit: '%', get: (r) => (r.stepd.io ? r.stepd.io.shareOfIdeal * 100 : undefined),
    target: { text: '≥ 90 %', met: (v) => v >= 90 }, timedOut: (r) => r.stepd.io?.timedOut,
  },
  { key: 'io.stepRunP50Ms', section: '6 io 3×20 ms', label: 'step started → completed p50', unit: 'ms', get: (r) => r.stepd.io?.stepRunMs.p50 },
  { key: 'io.stepRunP99Ms', section: '6 io 3×20 ms', label: 'step started → completed p99', unit: 'ms', get: (r) => r.stepd.io?.stepRunMs.p99 },
  {
    key: 'workers.stepsPerSec', section: '6b workers, 20 ms', label: 'steps/s (worker processes × concurrency)', unit: '/s', get: (r) => r.stepd.workers?.stepsPerSec,
    timedOut: (r) => r.stepd.workers?.timedOut,
  },
  {
    key: 'workers.shareOfIdeal', section: '6b workers, 20 ms', label: 'share of ideal (workers × concurrency ÷ 20 ms)', unit: '%',
    get: (r) => (r.stepd.workers ? r.stepd.workers.shareOfIdeal * 100 : undefined), target: { text: '≥ 80 %', met: (v) => v >= 80 }, timedOut: (r) => r.stepd.workers?.timedOut,
  },
  { key: 'workers.addedMsPerStep', section: '6b workers, 20 ms', label: 'added latency per step vs in-process', unit: 'ms', get: (r) => r.stepd.workers?.chain.addedMsPerStep },
  { key: 'workers.workerMsPerStep', section: '6b workers, 20 ms', label: 'chain: ms per worker step', unit: 'ms', get: (r) => r.stepd.workers?.chain.workerMsPerStep },
  { key: 'workers.inProcessMsPerStep', section: '6b workers, 20 ms', label: 'chain: ms per in-process step', unit: 'ms', get: (r) => r.stepd.workers?.chain.inProcessMsPerStep },
  {
    key: 'fanoutLarge.totalMs', section: '7 fan-out 10k', label: 'total (forEach + join)', unit: 'ms', get: (r) => r.stepd.fanoutLarge?.totalMs,
    timedOut: (r) => r.stepd.fanoutLarge?.timedOut,
  },
  { key: 'fanoutLarge.itemsPerSec', section: '7 fan-out 10k', label: 'items/s', unit: '/s', get: (r) => r.stepd.fanoutLarge?.itemsPerSec, pgboss: (r) => r.pgboss?.throughput.jobsPerSec },
  { key: 'fanoutLarge.startSpanMs', section: '7 fan-out 10k', label: 'first → last item started', unit: 'ms', get: (r) => r.stepd.fanoutLarge?.phases?.startSpanMs },
  { key: 'fanoutLarge.peakRssMiB', section: '7 fan-out 10k', label: 'executor peak RSS during it', unit: 'MiB', get: (r) => r.stepd.fanoutLarge?.peakRssMiB },
  { key: 'ceiling.1', section: '8 peers', label: 'ceiling, 1 client (2 commits/transition)', unit: '/s', get: (r) => r.ceiling.find((c) => c.clients === 1)?.transitionsPerSec },
  { key: 'ceiling.8', section: '8 peers', label: 'ceiling, 8 clients', unit: '/s', get: (r) => r.ceiling.find((c) => c.clients === 8)?.transitionsPerSec },
  { key: 'pgboss.jobsPerSec', section: '8 peers', label: 'pg-boss no-op jobs/s', unit: '/s', get: (r) => r.pgboss?.throughput.jobsPerSec, floor: floorRate, timedOut: (r) => r.pgboss?.throughput.timedOut },
  {
    key: 'pgboss.sustainedJobsPerSec', section: '8 peers', label: 'pg-boss no-op jobs/s (sustained)', unit: '/s',
    get: (r) => r.pgboss?.sustained?.jobsPerSec, floor: floorRate, timedOut: (r) => r.pgboss?.sustained?.timedOut,
  },
  { key: 'pgboss.chainTotalMs', section: '8 peers', label: 'pg-boss chain total', unit: 'ms', get: (r) => r.pgboss?.chain.totalMs, timedOut: (r) => r.pgboss?.chain.timedOut },
  { key: 'pgboss.chainHopP50Ms', section: '8 peers', label: 'pg-boss chain hop p50', unit: 'ms', get: (r) => r.pgboss?.chain.hopMs.p50, floor: floorHopMs },
  { key: 'pgboss.chainHopP99Ms', section: '8 peers', label: 'pg-boss chain hop p99', unit: 'ms', get: (r) => r.pgboss?.chain.hopMs.p99 },
];

function ratio(runs: RunResult[], get: Getter, peer: Getter | undefined): number | undefined {
  if (!peer) return undefined;
  const r = spread(runs.map((run) => {
    const a = get(run);
    const b = peer(run);
    return a === undefined || b === undefined || b === 0 ? undefined : a / b;
  }));
  return Number.isFinite(r.median) ? r.median : undefined;
}

export function computeFigures(runs: RunResult[], scale: ScaleResult | undefined): Figure[] {
  const out: Figure[] = [];
  for (const d of DEFS) {
    const value = spread(runs.map(d.get));
    if (value.values.length === 0) continue; // not selected, or failed in every run
    const vsFloor = ratio(runs, d.get, d.floor);
    const vsCeiling = ratio(runs, d.get, d.ceiling);
    const vsPgBoss = ratio(runs, d.get, d.pgboss);
    const fig: Figure = { key: d.key, section: d.section, label: d.label, unit: d.unit, value };
    if (vsFloor !== undefined) fig.vsFloor = vsFloor;
    if (vsCeiling !== undefined) fig.vsCeiling = vsCeiling;
    if (vsPgBoss !== undefined) fig.vsPgBoss = vsPgBoss;
    if (d.target) fig.target = { text: d.target.text, met: d.target.met(value.median, { ...(vsCeiling !== undefined ? { ceiling: vsCeiling } : {}), ...(vsPgBoss !== undefined ? { pgboss: vsPgBoss } : {}) }) };
    const cut = d.timedOut ? runs.filter(d.timedOut).length : 0;
    if (cut > 0) fig.note = `timed out in ${cut} run(s): partial`;
    out.push(fig);
  }
  if (scale) {
    const rows = scale.finishedRows.toLocaleString('en-US');
    const empty = spread(scale.empty.map((b) => b.latencyMs.p50));
    const loaded = spread(scale.loaded.map((b) => b.latencyMs.p50));
    const ratios = spread(claimRatios(scale));
    const at = out.findIndex((f) => f.section === '5 scale');
    out.splice(at, 0,
      { key: 'claim.emptyP50Ms', section: '5 scale', label: `claim p50, 0 finished rows`, unit: 'ms', value: empty, note: `explain ${spread(scale.empty.map((b) => b.explainExecutionMs)).median.toFixed(3)} ms` },
      { key: 'claim.loadedP50Ms', section: '5 scale', label: `claim p50, ${rows} finished rows`, unit: 'ms', value: loaded, note: `explain ${spread(scale.loaded.map((b) => b.explainExecutionMs)).median.toFixed(3)} ms${scale.loaded.every((b) => b.usesReadyIndex) ? '' : '; plan skips the ready index'}` },
      { key: 'claim.ratio', section: '5 scale', label: `claim at ${rows} ÷ empty`, unit: '×', value: ratios, target: { text: '≤ 1.2×', met: ratios.median <= 1.2 } },
    );
  }
  return out;
}
