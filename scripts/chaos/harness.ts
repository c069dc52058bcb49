/**
 * What every scenario shares: a fresh schema on the private cluster, a client pool that rides
 * out restarts (the harness drives stepd through the SQL contract like any other service), the
 * daemons under test, a background approver for gates, killing daemons (and remembering what
 * they had running), and waiting for the workflows to finish.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { migrate } from '../../src/db/migrate.js';
import type { PrivateCluster } from './cluster.js';
import { Daemon } from './daemon.js';
import type { EffectLedger, EffectServer } from './effects.js';
import { CHAOS_SIGNAL, MCP_SERVER, mixedRows, targetsOf, type Targets } from './load.js';

export type Size = 'reduced' | 'full';

export interface Suite {
  cluster: PrivateCluster;
  effects: EffectServer;
  size: Size;
  seed: number;
  log: Logger;
  progress: (msg: string) => void;
}

export interface ScenarioOptions {
  /** `--concurrency` of each daemon. */
  concurrency: number;
  /** `limits.tools["*"]` in the config: tool steps running at once over every executor. */
  toolLimit?: number;
}

/** A daemon killed by the harness and the steps it had running then. */
export interface KillRecord {
  executorId: string;
  at: number;
  orphans: { id: string; chain: string }[];
}

export type Row = Record<string, unknown>;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Scenario {
  readonly schema = `chaos_${randomBytes(4).toString('hex')}`;
  readonly db: pg.Pool;
  readonly ledger: EffectLedger;
  readonly targets: Targets;
  readonly daemons = new Map<string, Daemon>();
  readonly kills: KillRecord[] = [];
  /** Daemons that exited on their own (then restarted with the same id). */
  deaths = 0;
  /** How long the last settle() waited for the workflows to finish after the load ended. */
  drainMs: number | undefined;
  private readonly deathLog: string[] = [];
  private approver: NodeJS.Timeout | undefined;
  private inserted = 0;

  constructor(
    readonly suite: Suite,
    readonly name: string,
    readonly opts: ScenarioOptions,
  ) {
    this.db = new pg.Pool({ connectionString: suite.cluster.url, max: 4, application_name: 'stepd-chaos', connectionTimeoutMillis: 5_000 });
    this.db.on('error', () => {});
    this.ledger = suite.effects.reset();
    this.targets = targetsOf(suite.effects);
  }

  get t(): { workflows: string; steps: string; signals: string } {
    return { workflows: `${this.schema}.workflows`, steps: `${this.schema}.workflow_steps`, signals: `${this.schema}.signals` };
  }

  /** The tool-call limit the scenario promises: the tool limit, else every daemon's concurrency. */
  limit(executors: number): number {
    return Math.min(this.opts.toolLimit ?? Infinity, this.opts.concurrency * executors);
  }

  async setup(): Promise<void> {
    await migrate({ url: this.suite.cluster.url, schema: this.schema });
  }

  config(): unknown {
    return {
      mcpServers: { [MCP_SERVER]: { url: this.suite.effects.mcpUrl } },
      http: { allow: ['http://127.0.0.1:*'] },
      ...(this.opts.toolLimit ? { limits: { tools: { '*': this.opts.toolLimit } } } : {}),
    };
  }

  /** A query that waits out a database restart (connection errors are retried for up to 60 s). */
  async q<R = Row>(text: string, values?: unknown[]): Promise<R[]> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        return (await this.db.query(text, values)).rows as R[];
      } catch (err) {
        const code = (err as { code?: string }).code;
        // Not an SQLSTATE (ECONNREFUSED, ECONNRESET, a lost connection), or one of a server going away.
        const connection = code === undefined || !/^[0-9A-Z]{5}$/.test(code) || code.startsWith('08') || code.startsWith('57P');
        if (!connection || Date.now() > deadline) throw err;
        await sleep(100);
      }
    }
  }

  async startDaemon(executorId: string): Promise<Daemon> {
    const d = new Daemon({ url: this.suite.cluster.url, schema: this.schema, executorId, concurrency: this.opts.concurrency, config: this.config() });
    this.daemons.set(executorId, d);
    await d.ready();
    return d;
  }

  /** SIGKILL, then the steps it left running (it can no longer change them). */
  async kill(executorId: string): Promise<KillRecord> {
    const d = this.daemons.get(executorId);
    if (!d) throw new Error(`no daemon ${executorId}`);
    await d.kill();
    const at = Date.now();
    this.daemons.delete(executorId);
    const orphans = await this.q<{ id: string; chain: string }>(
      `SELECT id::text, coalesce(first_attempt_id, id)::text AS chain FROM ${this.t.steps} WHERE status = 'running' AND executor_id = $1`,
      [executorId],
    );
    const rec = { executorId, at, orphans };
    this.kills.push(rec);
    return rec;
  }

  /** Restarts (same id) any daemon that exited on its own, counting it as a death. */
  async reviveDead(): Promise<void> {
    for (const [id, d] of [...this.daemons]) {
      if (!d.diedOnItsOwn) continue;
      this.deaths += 1;
      this.deathLog.push(`${id} exited (${d.exitDescription}); last lines:\n  ${d.lastLines.slice(-8).join('\n  ')}`);
      this.suite.progress(`${this.name}: daemon ${id} died (${d.exitDescription}); restarting it`);
      this.daemons.delete(id);
      await this.startDaemon(id);
    }
  }

  get deathDetails(): string[] {
    return [...this.deathLog];
  }

  /** Inserts `count` workflows of the mixed load in one statement. */
  async insertMixed(count: number, createdBy = 'chaos'): Promise<void> {
    const rows = mixedRows(count, this.targets, this.inserted);
    this.inserted += count;
    await this.q(
      `INSERT INTO ${this.t.workflows} (name, flow, input, created_by)
       SELECT n, f::jsonb, i::jsonb, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS x(n, f, i)`,
      [rows.map((r) => r.name), rows.map((r) => r.flow), rows.map((r) => r.input), createdBy],
    );
  }

  /** Inserts `total` mixed workflows in batches spread over `durationMs`. */
  async streamLoad(total: number, durationMs: number, batches = 20): Promise<void> {
    const per = Math.ceil(total / batches);
    for (let sent = 0; sent < total; sent += per) {
      await this.insertMixed(Math.min(per, total - sent));
      await sleep(durationMs / batches);
    }
  }

  /**
   * Every 200 ms, as the services around a workflow would: readies every pending gate, and sends
   * each waiting `signal` workflow its signal (once per workflow, keyed by its id).
   */
  startApprover(): void {
    const tick = async () => {
      await this.db.query(`UPDATE ${this.t.steps} SET status = 'ready' WHERE status = 'pending' AND name = 'gate'`).catch(() => {});
      await this.db
        .query(
          `INSERT INTO ${this.t.signals} (name, key, payload)
           SELECT $1, s.workflow_id::text, '{}' FROM ${this.t.steps} s
            WHERE s.status = 'pending' AND s.name = 'paid'
              AND NOT EXISTS (SELECT 1 FROM ${this.t.signals} g WHERE g.name = $1 AND g.key = s.workflow_id::text)`,
          [CHAOS_SIGNAL],
        )
        .catch(() => {});
      this.approver = setTimeout(() => void tick(), 200);
    };
    this.approver = setTimeout(() => void tick(), 200);
  }

  /** Waits until no workflow is new or running (reviving daemons that died); false on timeout. */
  async settle(timeoutMs: number): Promise<boolean> {
    const began = Date.now();
    const deadline = began + timeoutMs;
    for (;;) {
      await this.reviveDead();
      const [r] = await this.q<{ live: number }>(`SELECT count(*)::int AS live FROM ${this.t.workflows} WHERE status IN ('new', 'running')`);
      this.drainMs = Date.now() - began;
      if (r!.live === 0) return true;
      if (Date.now() > deadline) {
        for (const [id, d] of this.daemons) {
          this.suite.progress(`${this.name}: ${r!.live} workflow(s) still live; daemon ${id} (${d.exitDescription}) last logged:\n  ${d.lastLines.slice(-6).join('\n  ')}`);
        }
        return false;
      }
      await sleep(250);
    }
  }

  async teardown(): Promise<void> {
    clearTimeout(this.approver);
    this.approver = undefined;
    await Promise.allSettled([...this.daemons.values()].map((d) => d.stop(5_000)));
    this.daemons.clear();
    await this.db.query(`DROP SCHEMA IF EXISTS ${this.schema} CASCADE`).catch(() => {});
    await this.db.end().catch(() => {});
  }
}
