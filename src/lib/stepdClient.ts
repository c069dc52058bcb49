/**
 * The typed client helpers of the library (`stepd.startWorkflow`, `sendSignal`,
 * `waitForWorkflow`, `getWorkflow`, `cancelWorkflow`): the workflow operations of
 * src/api/operations.ts over a client connection (no executor marker), so every write goes
 * through the SQL contract's guards as another service's would, with the same checks (flow
 * validation, the user's tool permissions, caps).
 */
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { Operations, type SentSignal, type StartedWorkflow, type WorkflowDetails } from '../api/operations.js';
import type { Caps } from '../flow/caps.js';
import type { Database, WorkflowStatus } from '../db/tables.js';
import type { Logger } from '../logger.js';
import type { PermissionPolicy } from '../tools/permissions.js';
import type { SendSignalOptions, StartWorkflowOptions } from './clientOptions.js';
import { WorkflowWaits, type WaitOptions } from './workflowWaits.js';
import type { WorkflowOutcome } from './workflowOutcome.js';

export interface StepdClientDeps {
  url: string;
  schema: string;
  pool: pg.Pool;
  db: Kysely<Database>;
  log: Logger;
  user: string;
  permissions?: PermissionPolicy;
  caps?: Readonly<Caps>;
  /** How often waited-for workflow rows are read when no event arrives (default 1 s). */
  waitPollMs?: number;
}

export class StepdClient {
  readonly #deps: StepdClientDeps;
  readonly #ops: Operations;
  readonly #waits: WorkflowWaits;

  constructor(deps: StepdClientDeps) {
    this.#deps = deps;
    this.#ops = new Operations({
      pool: deps.pool,
      db: deps.db,
      schema: deps.schema,
      ...(deps.permissions ? { permissions: deps.permissions } : {}),
      ...(deps.caps ? { caps: deps.caps } : {}),
    });
    this.#waits = new WorkflowWaits({ url: deps.url, schema: deps.schema, db: deps.db, log: deps.log, ...(deps.waitPollMs !== undefined ? { pollMs: deps.waitPollMs } : {}) });
  }

  /** Starts a workflow (an INSERT through the SQL contract, after the flow and the user's permissions are checked). */
  startWorkflow<Input extends Record<string, unknown>>(opts: StartWorkflowOptions<Input>): Promise<StartedWorkflow> {
    const { user, ...args } = opts;
    return this.#ops.startWorkflow(user ?? this.#deps.user, args);
  }

  /** Sends a signal: the steps waiting for it (name, and key when they wait for one) go on. */
  sendSignal<Payload extends Record<string, unknown>>(opts: SendSignalOptions<Payload>): Promise<SentSignal> {
    const { user, ...args } = opts;
    return this.#ops.sendSignal(user ?? this.#deps.user, args);
  }

  /**
   * Resolves once the workflow has ended (completed, failed or cancelled), as its row says; a
   * failed workflow resolves too (look at `status`). Rejects on `timeoutMs` or `signal`.
   */
  waitForWorkflow<Output = unknown>(workflowId: string | number, opts: WaitOptions = {}): Promise<WorkflowOutcome<Output>> {
    return this.#waits.wait(String(workflowId), opts) as Promise<WorkflowOutcome<Output>>;
  }

  /** A workflow with its steps (every attempt) and what it waits for. */
  getWorkflow(workflowId: string | number): Promise<WorkflowDetails> {
    return this.#ops.getWorkflow(this.#deps.user, { workflowId });
  }

  /** Cancels a workflow that has not ended (its running steps are aborted). */
  async cancelWorkflow(workflowId: string | number, opts: { user?: string } = {}): Promise<{ workflowId: string; status: WorkflowStatus }> {
    const r = await this.#ops.cancelWorkflow(opts.user ?? this.#deps.user, { workflowId });
    return { workflowId: r.workflowId, status: r.status };
  }

  async close(): Promise<void> {
    await this.#waits.close();
  }
}
