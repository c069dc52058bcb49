/**
 * The figures of one scenario, read from the database and the side-effect ledger once the
 * workflows have settled, and the one line that reports them. A scenario fails when a workflow
 * was lost, a step was done twice, a side effect is missing or was repeated without one
 * idempotency key, more tool calls ran at once than the limit, or a daemon died on its own.
 */
import type { Row, Scenario } from './harness.js';
import { expectedEffects } from './load.js';

export interface WorkflowRow {
  id: string;
  name: string;
  input: unknown;
  status: string;
  error: unknown;
}

export interface MeasureOptions {
  /** Workflows that must complete (default: all). */
  mustComplete?: (w: WorkflowRow) => boolean;
  /** Side effects a completed workflow must have caused (default: the mixed load's). */
  expected?: (w: WorkflowRow) => string[];
  executors: number;
  /** Times from a restart's end until the first step claimed afterwards was done, ms. */
  recoveryMs?: number[];
  /** Scenario-specific figures, appended to the line. */
  extra?: string[];
  /** Scenario-specific reasons to fail. */
  failures?: string[];
  startedAt: number;
}

export interface Figures {
  name: string;
  line: string;
  failures: string[];
}

export function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const secs = (ms: number | undefined) => (ms === undefined ? '—' : `${(ms / 1000).toFixed(1)} s`);

export async function measure(s: Scenario, o: MeasureOptions): Promise<Figures> {
  const { workflows, steps } = s.t;
  const rows = await s.q<WorkflowRow>(`SELECT id::text, name, input, status, error FROM ${workflows} ORDER BY id`);
  const must = rows.filter(o.mustComplete ?? (() => true));
  const completed = must.filter((w) => w.status === 'completed');
  const lost = must.filter((w) => w.status !== 'completed');

  // Two `done` rows for one step position (no flow here loops), or for one attempt chain.
  const [twice] = await s.q<{ position: number; chain: number }>(
    `SELECT (SELECT count(*) FROM (SELECT 1 FROM ${steps} WHERE status = 'done'
                                    GROUP BY workflow_id, name, fanout_id, item_index HAVING count(*) > 1) p)::int AS position,
            (SELECT count(*) FROM (SELECT 1 FROM ${steps} WHERE status = 'done'
                                    GROUP BY coalesce(first_attempt_id, id) HAVING count(*) > 1) c)::int AS chain`,
  );
  const doneTwice = Math.max(twice!.position, twice!.chain);
  // A signal wait records the signal it consumed: it must be the one keyed by its own workflow.
  const [strayed] = await s.q<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${steps} s JOIN ${workflows} w ON w.id = s.workflow_id
      WHERE w.name = 'signal' AND s.name = 'paid' AND s.status = 'done' AND s.result ->> 'key' IS DISTINCT FROM s.workflow_id::text`,
  );

  const expected = o.expected ?? ((w: WorkflowRow) => expectedEffects(w.name, w.id, w.input));
  let missing = 0;
  for (const w of completed) for (const id of expected(w)) if (!s.ledger.effects.has(id)) missing += 1;
  let repeated = 0;
  let oneKey = 0;
  for (const r of s.ledger.effects.values()) {
    if (r.calls < 2) continue;
    repeated += 1;
    if (r.keys[0] !== null && r.keys.every((k) => k === r.keys[0])) oneKey += 1;
  }

  const orphanMs: number[] = [];
  let orphans = 0;
  for (const k of s.kills) {
    orphans += k.orphans.length;
    if (k.orphans.length === 0) continue;
    const again = await s.q<{ ms: number | null }>(
      `SELECT (extract(epoch FROM min(started_at)) * 1000 - $2::float8)::float8 AS ms
         FROM ${steps} WHERE coalesce(first_attempt_id, id) = ANY($1::bigint[]) AND started_at > to_timestamp($2::float8 / 1000)
        GROUP BY coalesce(first_attempt_id, id)`,
      [k.orphans.map((x) => x.chain), k.at],
    );
    for (const a of again) if (a.ms !== null) orphanMs.push(a.ms);
  }
  const notRerun = orphans - orphanMs.length;

  const limit = s.limit(o.executors);
  const inflight = s.ledger.maxInFlight;
  const failures = [...(o.failures ?? [])];
  if (lost.length > 0) failures.push(`${lost.length} workflow(s) lost, e.g. #${lost[0]!.id} ${lost[0]!.name} ${lost[0]!.status} ${JSON.stringify(lost[0]!.error ?? null).slice(0, 300)}`);
  if (doneTwice > 0) failures.push(`${doneTwice} step(s) done twice`);
  if (strayed!.n > 0) failures.push(`${strayed!.n} signal wait(s) recorded with another workflow's signal`);
  if (missing > 0) failures.push(`${missing} side effect(s) missing`);
  if (repeated > oneKey) failures.push(`${repeated - oneKey} side effect(s) repeated without one idempotency key`);
  if (inflight > limit) failures.push(`${inflight} tool calls in flight at once, limit ${limit}`);
  if (s.deaths > 0) failures.push(`daemon died ${s.deaths} time(s): ${s.deathDetails[0] ?? ''}`);

  const p50 = percentile(orphanMs, 50);
  const parts = [
    `wf ${completed.length}/${must.length} lost ${lost.length}`,
    `done twice ${doneTwice}`,
    `effects ${s.ledger.calls} missing ${missing} repeated ${repeated} (one key ${oneKey})`,
    `inflight ${inflight}/${limit === Infinity ? '∞' : limit}`,
    `orphans ${orphans}${orphans ? ` p50 ${secs(p50)} max ${secs(percentile(orphanMs, 100))}${notRerun ? ` not re-run ${notRerun}` : ''}${p50 !== undefined && p50 > 20_000 ? ' (> 20 s)' : ''}` : ''}`,
    `recovery ${o.recoveryMs?.length ? `p50 ${secs(percentile(o.recoveryMs, 50))} max ${secs(percentile(o.recoveryMs, 100))}` : '—'}`,
    `died ${s.deaths}`,
    `drain ${secs(s.drainMs)}`,
    ...(o.extra ?? []),
    `${((Date.now() - o.startedAt) / 1000).toFixed(0)} s`,
  ];
  const line = `${s.name.padEnd(18)} ${failures.length ? 'FAIL' : 'ok  '} ${parts.join(' | ')}`;
  return { name: s.name, line, failures };
}

/** How the `done` steps divide among executors, e.g. `share a 52% b 48%`. */
export async function shareOf(s: Scenario, ids: string[]): Promise<string> {
  const rows = await s.q<Row & { executor_id: string; n: number }>(
    `SELECT executor_id, count(*)::int AS n FROM ${s.t.steps} WHERE status = 'done' AND executor_id IS NOT NULL GROUP BY executor_id`,
  );
  const total = rows.reduce((a, r) => a + r.n, 0) || 1;
  const by = new Map(rows.map((r) => [r.executor_id, r.n]));
  return `share ${ids.map((id) => `${id} ${Math.round(((by.get(id) ?? 0) / total) * 100)}%`).join(' ')}`;
}
