/**
 * The daemon's webhooks (docs/operations.md, "Notifications"), when the config has `notify`:
 *   - dispatch: every `pollMs`, one transaction takes outbox rows (sql/0032: written by triggers
 *     in the transaction that made the event true), reads what they describe, creates a gate's
 *     approval links, and sends one pg-boss job per matching hook through the same connection
 *     (pg-boss's `db` option) — so an event becomes jobs exactly when its outbox row goes, and
 *     a crash in between leaves the row for the next pass;
 *   - delivery: pg-boss works the queue; each job POSTs its JSON body to its hook's URL, signed
 *     (signature.ts), and a failure (a network error, a non-2xx answer) is retried by pg-boss with
 *     back-off. At least once, after commit. The secret never leaves this process: jobs carry
 *     the hook's index and URL, not the secret, and nothing logs it;
 *   - egress: a delivery goes through the egress policy of `http.request` (src/tools/egress.ts,
 *     the config's `http.allow`): the hook's host is resolved, every address checked, and the
 *     socket connects to exactly the checked address. A refused URL (loopback, private, metadata,
 *     any IANA special-purpose range, the host's own interfaces) never connects: its job fails at
 *     once, not retried, with `{ code: 'egress_denied' }` as its output. Redirects are never
 *     followed (a 3xx is an error answer, retried), so no redirect can lead past the check.
 */
import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import { PgBoss, type Job, type JobResult } from 'pg-boss';
import { createPool, withTransaction } from '../db/connect.js';
import { getNotifiedStep, getNotifiedWorkflow, insertApprovalLinks, takeOutboxRows, type NewApprovalLink, type OutboxRow } from '../db/queries/notifications.js';
import type { Logger } from '../logger.js';
import { EgressDeniedError, EgressPolicy } from '../tools/egress.js';
import { egressFetch } from '../tools/llm/egressFetch.js';
import { bossSchemaName, clientDb, NOTIFY_QUEUE, NOTIFY_QUEUE_OPTIONS } from '../schedules/bossSchema.js';
import { failedPayload, gateOf, linkUsers, waitingPayload, type LinkPair } from './notificationPayload.js';
import { DEFAULT_LINK_TTL_MS, type NotifyHook } from './notifyConfig.js';
import { signBody, SIGNATURE_HEADER } from './signature.js';
import type { NotifyMetrics } from '../telemetry/notifyMetrics.js';

export interface NotifierOptions {
  databaseUrl: string;
  schema: string;
  log: Logger;
  hooks: readonly NotifyHook[];
  /** Where approval links point (the daemon's HTTP URL, or config approvalLinks.baseUrl); none: no links. */
  linkBaseUrl?: string;
  linkTtlMs?: number;
  /** How often the outbox is read (default 500 ms). */
  pollMs?: number;
  /** pg-boss's polling of the queue (default 1 s) and its retry delay (seconds, default the queue's). */
  workPollSeconds?: number;
  retryDelaySeconds?: number;
  /** A webhook's answer is awaited this long (default 10 s). */
  timeoutMs?: number;
  /** Counts each delivery attempt, sent or failed (the daemon's /metrics). */
  metrics?: Pick<NotifyMetrics, 'sent' | 'failed'>;
  /** Where deliveries may connect (default: the built-in refusals, no allow entries). */
  egress?: EgressPolicy;
}

export interface NotifyJob {
  hook: number;
  url: string;
  event: { id: string; type: string } & Record<string, unknown>;
}

const BATCH = 50;

export class Notifier {
  private readonly pool: pg.Pool;
  private readonly log: Logger;
  private boss: PgBoss | undefined;
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<void> | undefined;
  private stopping = false;
  private readonly post: ReturnType<typeof egressFetch>;

  constructor(private readonly opts: NotifierOptions) {
    this.log = opts.log.child({ component: 'notify' });
    this.post = egressFetch({ egress: opts.egress ?? new EgressPolicy(), user: null, maxBytes: 1024 * 1024 });
    this.pool = createPool({ url: opts.databaseUrl, schema: opts.schema, role: 'executor', max: 2, applicationName: `stepd-notify:${opts.schema}` });
  }

  async start(): Promise<void> {
    const boss = new PgBoss({
      connectionString: this.opts.databaseUrl,
      schema: bossSchemaName(this.opts.schema),
      application_name: `stepd-notify-boss:${this.opts.schema}`,
      max: 3,
      migrate: false,
      schedule: false,
      supervise: true,
      reindex: false,
    });
    boss.on('error', (err: unknown) => this.log.warn({ err }, 'pg-boss reported an error (it retries on its own)'));
    await boss.start();
    if (!(await boss.getQueue(NOTIFY_QUEUE))) await boss.createQueue(NOTIFY_QUEUE, NOTIFY_QUEUE_OPTIONS);
    await boss.work<NotifyJob>(NOTIFY_QUEUE, { pollingIntervalSeconds: this.opts.workPollSeconds ?? 1, batchSize: 1, perJobResults: true }, async (jobs) => {
      const results: JobResult[] = [];
      for (const job of jobs) results.push(await this.deliver(job));
      return results;
    });
    this.boss = boss;
    this.schedule(0);
    this.log.info({ hooks: this.opts.hooks.length, queue: NOTIFY_QUEUE }, 'notifications running');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    await this.pass;
    await this.boss?.stop({ graceful: true, timeout: 5_000 }).catch((err: unknown) => this.log.warn({ err }, 'pg-boss did not stop cleanly'));
    await this.pool.end().catch(() => {});
  }

  private schedule(delay: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.pass = this.dispatch()
        .then(() => undefined)
        .catch((err: unknown) => this.log.warn({ err }, 'notification dispatch failed; trying again'))
        .finally(() => this.schedule(this.opts.pollMs ?? 500));
    }, delay);
  }

  /** Moves outbox rows into the queue until the outbox is empty (a batch per transaction). */
  async dispatch(): Promise<number> {
    const boss = this.boss;
    if (!boss) return 0;
    let moved = 0;
    for (;;) {
      const n = await withTransaction(this.pool, async (client) => {
        const rows = await takeOutboxRows(client, BATCH);
        for (const row of rows) await this.enqueue(boss, client, row);
        return rows.length;
      });
      moved += n;
      if (n < BATCH || this.stopping) return moved;
    }
  }

  private async enqueue(boss: PgBoss, client: pg.PoolClient, row: OutboxRow): Promise<void> {
    const hooks = this.opts.hooks.map((h, i) => ({ h, i })).filter(({ h }) => h.on.includes(row.kind));
    if (hooks.length === 0) return;
    const event = await this.describe(client, row);
    if (!event) return;
    for (const { h, i } of hooks) {
      const data: NotifyJob = { hook: i, url: h.url, event };
      await boss.send(NOTIFY_QUEUE, data, {
        db: clientDb(client),
        singletonKey: `${row.id}:${i}`,
        ...(this.opts.retryDelaySeconds !== undefined ? { retryDelay: this.opts.retryDelaySeconds } : {}),
      });
    }
  }

  /** The event's body, read from the rows; undefined when it is no longer worth telling (not a gate). */
  private async describe(client: pg.PoolClient, row: OutboxRow): Promise<NotifyJob['event'] | undefined> {
    const wf = await getNotifiedWorkflow(client, row.workflow_id);
    if (!wf) return undefined;
    const at = new Date();
    if (row.kind === 'workflow.failed') return failedPayload({ id: row.id, schema: this.opts.schema, at, wf });
    const step = row.step_id === null ? undefined : await getNotifiedStep(client, row.step_id);
    if (!step || step.status !== 'pending' || step.child_id !== null) return undefined;
    const gate = gateOf(wf.flow, step.name);
    if (!gate) return undefined;
    const links = gate.links && this.opts.linkBaseUrl ? await this.createLinks(client, wf.created_by, step, gate) : undefined;
    return waitingPayload({ id: row.id, schema: this.opts.schema, at, wf, step, gate, ...(links ? { links } : {}) });
  }

  private async createLinks(client: pg.PoolClient, workflowUser: string | null, step: { id: string; workflow_id: string }, gate: Parameters<typeof linkUsers>[0]): Promise<LinkPair[]> {
    const ttl = this.opts.linkTtlMs ?? DEFAULT_LINK_TTL_MS;
    const expiresAt = new Date(Date.now() + ttl).toISOString();
    const base = this.opts.linkBaseUrl!.replace(/\/+$/, '');
    const rows: NewApprovalLink[] = [];
    const pairs: LinkPair[] = [];
    for (const user of linkUsers(gate, workflowUser)) {
      const urls: Record<'approve' | 'reject', string> = { approve: '', reject: '' };
      for (const action of ['approve', 'reject'] as const) {
        const token = randomBytes(32).toString('base64url');
        rows.push({ stepId: String(step.id), workflowId: String(step.workflow_id), action, actAs: user, tokenSha256: createHash('sha256').update(token).digest(), expiresInMs: ttl });
        urls[action] = `${base}/links/${step.id}/${action}/${token}`;
      }
      pairs.push({ user, ...urls, expiresAt });
    }
    await insertApprovalLinks(client, rows);
    return pairs;
  }

  /**
   * POSTs one job's event to its hook, signed, through the egress check. `completed` on a 2xx;
   * `failed` (pg-boss retries) on a network error or another answer; `deadletter` (never retried,
   * never connected) when egress refuses the URL.
   */
  private async deliver(job: Job<NotifyJob>): Promise<JobResult> {
    const hook = this.opts.hooks[job.data.hook];
    if (!hook || hook.url !== job.data.url) {
      this.log.warn({ jobId: job.id, hook: job.data.hook }, 'a notification for a hook no longer configured: dropped');
      return { id: job.id, status: 'completed', output: { dropped: 'hook no longer configured' } };
    }
    const body = JSON.stringify(job.data.event);
    const where = { jobId: job.id, hook: job.data.hook, type: job.data.event.type };
    let res: Response;
    try {
      res = await this.post(hook.url, {
        method: 'POST',
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'stepd-notify',
          'x-stepd-event': job.data.event.type,
          'x-stepd-delivery': job.id,
          [SIGNATURE_HEADER]: signBody(hook.secret, body),
        },
        body,
      });
    } catch (err) {
      if (err instanceof EgressDeniedError) {
        this.log.warn({ ...where, code: err.code, error: err.message }, 'webhook refused by the egress rules (http.allow); not retried');
        this.opts.metrics?.failed(job.data.event.type, 'egress_denied');
        return { id: job.id, status: 'deadletter', output: { code: err.code, message: err.message, details: err.details } };
      }
      this.opts.metrics?.failed(job.data.event.type, 'unreachable');
      this.log.warn({ ...where, error: (err as Error).message }, 'webhook delivery failed; pg-boss retries it');
      return { id: job.id, status: 'failed', output: { message: `webhook ${job.data.hook} unreachable: ${(err as Error).message}` } };
    }
    if (!res.ok) {
      this.opts.metrics?.failed(job.data.event.type, 'http_error');
      this.log.warn({ ...where, status: res.status }, 'webhook answered with an error; pg-boss retries it');
      return { id: job.id, status: 'failed', output: { message: `webhook ${job.data.hook} answered ${res.status}` } };
    }
    this.opts.metrics?.sent(job.data.event.type);
    this.log.info({ ...where, eventId: job.data.event.id }, 'webhook delivered');
    return { id: job.id, status: 'completed' };
  }
}
