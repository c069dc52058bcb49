/**
 * What the executor asked of PostgreSQL during a scenario, from PostgreSQL's own views:
 * pg_stat_statements (calls, execution time and rows of each normalized statement) and
 * pg_stat_database (commits). Only available when the server loads the extension
 * (`shared_preload_libraries = pg_stat_statements`, e.g. a private cluster: docs/performance.md);
 * otherwise `openStatementProbe` returns undefined and the bench goes on without it.
 *
 * Snapshots are diffed, never reset, so other users of the server are not disturbed. The
 * harness's own statements name the bench schema (`bench_…`) in their text and are left out;
 * the executor's statements use its search_path and never do. Statements run inside trigger
 * functions are counted apart (`nested`), so top-level calls are the executor's round trips
 * to the server (a pipelined batch counts once per statement).
 */
import pg from 'pg';

interface StatementRow {
  key: string;
  query: string;
  toplevel: boolean;
  calls: number;
  totalMs: number;
  rows: number;
}

export interface StatementSnapshot {
  statements: Map<string, StatementRow>;
  commits: number;
  rollbacks: number;
  activeMs?: number;
  idleInTransactionMs?: number;
}

export interface StatementLine {
  /** The normalized statement, whitespace collapsed, cut to 160 characters. */
  query: string;
  calls: number;
  totalMs: number;
  rows: number;
}

/**
 * What a statement is for, read from its text (the executor's statements as of issue 12; a
 * statement not recognised counts as `other`): claims, admission, recording outcomes (lock and
 * finish, end a workflow, fan-out progress and joins), creating steps (admission's first steps
 * and successors alike), events, other reads (e.g. a forEach item's value), transaction control.
 */
export type StatementKind = 'claim' | 'admit' | 'record' | 'create' | 'events' | 'read' | 'tx' | 'other';

const KINDS: [StatementKind, RegExp][] = [
  ['tx', /^(BEGIN|START TRANSACTION|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b/i],
  ['claim', /^WITH (RECURSIVE wf|claimed AS)/i],
  ['admit', /^WITH picked AS/i],
  ['create', /^WITH ins AS \(\s*INSERT INTO workflow_steps|^INSERT INTO workflow_steps/i],
  ['record', /^WITH (locked|live|RECURSIVE outcome) AS|fanout_id = \$1|^UPDATE workflows|^UPDATE workflow_steps/i],
  ['events', /pg_notify/i],
  ['read', /^SELECT\b/i],
];

export function statementKind(query: string): StatementKind {
  return KINDS.find(([, re]) => re.test(query))?.[0] ?? 'other';
}

export interface StatementSummary {
  /** Top-level statements the executor sent (BEGIN and COMMIT included). */
  calls: number;
  /** Of those, BEGINs: the executor's explicit transactions. */
  transactions: number;
  /** Commits on the database minus the harness's autocommit statements: ≈ the executor's commits. */
  commits: number;
  /** Server execution time of the executor's top-level statements, ms (includes their triggers). */
  execMs: number;
  /** Statements run inside triggers and functions, counted apart. */
  nestedCalls: number;
  nestedMs: number;
  /** Top-level calls and server time by what they are for. */
  byKind: Partial<Record<StatementKind, { calls: number; ms: number }>>;
  /**
   * Database-wide session time (pg_stat_database, PostgreSQL 14+; the harness's polls are in
   * `activeMs` too): executing statements, and inside a transaction waiting for the client.
   */
  activeMs?: number;
  idleInTransactionMs?: number;
  /** Top-level statements by execution time, most first. */
  top: StatementLine[];
  /** Nested (trigger) statements by execution time, most first. */
  topNested: StatementLine[];
}

export interface StatementProbe {
  snapshot(): Promise<StatementSnapshot>;
  /** The executor's share of what happened between two snapshots; `harnessMarker` names the harness's statements. */
  diff(before: StatementSnapshot, after: StatementSnapshot, harnessMarker: string): StatementSummary;
  close(): Promise<void>;
}

const SNAPSHOT_SQL = `
  SELECT queryid::text || ':' || toplevel::text AS key, query, toplevel, calls::float8 AS calls,
         total_exec_time AS total_ms, rows::float8 AS rows
    FROM pg_stat_statements
   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`;

function shorten(query: string): string {
  const q = query.replace(/\s+/g, ' ').trim();
  return q.length > 160 ? `${q.slice(0, 157)}…` : q;
}

/** Connects and checks the view answers; undefined (connection closed) when the extension is not loaded. */
export async function openStatementProbe(url: string): Promise<StatementProbe | undefined> {
  const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench-statements' });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ libs: string }>(`SELECT current_setting('shared_preload_libraries') AS libs`);
    if (!/\bpg_stat_statements\b/.test(rows[0]!.libs)) throw new Error('not loaded');
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SELECT 1 FROM pg_stat_statements LIMIT 1');
  } catch {
    await client.end();
    return undefined;
  }
  return {
    async snapshot() {
      const { rows } = await client.query<{ key: string; query: string; toplevel: boolean; calls: number; total_ms: number; rows: number }>(SNAPSHOT_SQL);
      const { rows: db } = await client.query<{ commits: number; rollbacks: number; active_ms: number | null; idle_in_tx_ms: number | null }>(
        `SELECT xact_commit::float8 AS commits, xact_rollback::float8 AS rollbacks,
                (to_jsonb(d) ->> 'active_time')::float8 AS active_ms,
                (to_jsonb(d) ->> 'idle_in_transaction_time')::float8 AS idle_in_tx_ms
           FROM pg_stat_database d WHERE datname = current_database()`,
      );
      const statements = new Map<string, StatementRow>();
      for (const r of rows) statements.set(r.key, { key: r.key, query: r.query, toplevel: r.toplevel, calls: r.calls, totalMs: r.total_ms, rows: r.rows });
      const d = db[0]!;
      return {
        statements, commits: d.commits, rollbacks: d.rollbacks,
        ...(d.active_ms !== null ? { activeMs: d.active_ms } : {}),
        ...(d.idle_in_tx_ms !== null ? { idleInTransactionMs: d.idle_in_tx_ms } : {}),
      };
    },
    diff: diffSnapshots,
    async close() {
      await client.end();
    },
  };
}

/** Pure: the executor's statements between two snapshots. */
export function diffSnapshots(before: StatementSnapshot, after: StatementSnapshot, harnessMarker: string): StatementSummary {
  const top: StatementLine[] = [];
  const nested: StatementLine[] = [];
  let harnessCalls = 0;
  let transactions = 0;
  const byKind: StatementSummary['byKind'] = {};
  for (const a of after.statements.values()) {
    const b = before.statements.get(a.key);
    const calls = a.calls - (b?.calls ?? 0);
    if (calls <= 0) continue;
    const line = { query: shorten(a.query), calls, totalMs: a.totalMs - (b?.totalMs ?? 0), rows: a.rows - (b?.rows ?? 0) };
    if (a.query.includes('pg_stat_statements') || a.query.includes('pg_stat_database')) continue;
    if (a.query.includes(harnessMarker)) {
      if (a.toplevel) harnessCalls += calls;
      continue;
    }
    if (!a.toplevel) {
      nested.push(line);
      continue;
    }
    if (/^(BEGIN|START TRANSACTION)\b/i.test(line.query)) transactions += calls;
    const kind = (byKind[statementKind(line.query)] ??= { calls: 0, ms: 0 });
    kind.calls += calls;
    kind.ms += line.totalMs;
    top.push(line);
  }
  const byTime = (x: StatementLine, y: StatementLine) => y.totalMs - x.totalMs;
  top.sort(byTime);
  nested.sort(byTime);
  const sum = (lines: StatementLine[], f: (l: StatementLine) => number) => lines.reduce((s, l) => s + f(l), 0);
  return {
    calls: sum(top, (l) => l.calls),
    transactions,
    // Each of the probe's two snapshot statements and each harness statement is one autocommit transaction.
    commits: Math.max(0, after.commits - before.commits - harnessCalls - 2),
    execMs: sum(top, (l) => l.totalMs),
    nestedCalls: sum(nested, (l) => l.calls),
    nestedMs: sum(nested, (l) => l.totalMs),
    byKind,
    ...(after.activeMs !== undefined && before.activeMs !== undefined ? { activeMs: after.activeMs - before.activeMs } : {}),
    ...(after.idleInTransactionMs !== undefined && before.idleInTransactionMs !== undefined
      ? { idleInTransactionMs: after.idleInTransactionMs - before.idleInTransactionMs }
      : {}),
    top: top.slice(0, 12),
    topNested: nested.slice(0, 8),
  };
}
