/**
 * One ToolProvider per configured MCP server: a step's `tool: "kb.search"` calls the tool
 * `search` on the server named `kb`, over a connection shared by every step (see connection.ts).
 */
import type { Progress, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { McpServerConfig } from '../../configFile.js';
import { StepError } from '../../errors.js';
import { cutRemoteText, type Secrets } from '../../secrets.js';
import type { ToolContext, ToolInfo, ToolProgress, ToolProvider } from '../tool.js';
import { listAllTools, McpConnection, type Session } from './connection.js';
import { abortedError, classifyMcpError, isSessionExpired, toStepResult, type CallSite } from './results.js';
import { normalizeUsage } from '../../usage/stepUsage.js';
import { callToolAsTask } from './taskCall.js';

export interface McpProviderOptions {
  log: Logger;
  /** Close a connection after this long without calls (default 5 minutes; Infinity: never). */
  idleMs?: number;
  /** Limit for starting a server and its initialize + tools/list (default 30 s). */
  connectTimeoutMs?: number;
  /** The SDK's per-request limit, a backstop behind the step's own timeout (default 1 hour). */
  callTimeoutMs?: number;
  clientInfo?: { name: string; version: string };
  /** Redacted from a server's error text (cut to about 1 kB) before it is stored or logged. */
  secrets?: Secrets;
}

export interface McpProbeResult {
  ok: boolean;
  tools?: ToolInfo[];
  error?: string;
}

/** What every tools/call carries in `_meta`, so servers can deduplicate and audit. */
export interface StepdCallMeta {
  workflowId: string;
  stepId: string;
  stepName: string;
  attempt: number;
  user: string | null;
  idempotencyKey: string;
  [key: string]: unknown;
}

/** Thrown inside a session when the server no longer knows it: the call is sent once more on a new session. */
class SessionExpired extends Error {
  readonly error: StepError;
  constructor(error: StepError) {
    super(error.message);
    this.error = error;
  }
}

export class McpServerProvider implements ToolProvider {
  readonly prefix: string;
  readonly #connection: McpConnection;
  readonly #callTimeoutMs: number;
  readonly #listTimeoutMs: number;
  readonly #secrets: Secrets | undefined;
  readonly #log: Logger;

  constructor(name: string, server: McpServerConfig, options: McpProviderOptions) {
    this.prefix = name;
    this.#log = options.log.child({ component: 'mcp' });
    this.#secrets = options.secrets;
    this.#callTimeoutMs = options.callTimeoutMs ?? 60 * 60_000;
    this.#listTimeoutMs = options.connectTimeoutMs ?? 30_000;
    this.#connection = new McpConnection({
      name,
      server,
      log: this.#log,
      idleMs: options.idleMs ?? 5 * 60_000,
      connectTimeoutMs: this.#listTimeoutMs,
      clientInfo: options.clientInfo ?? { name: 'stepd', version: '0.1.0' },
      ...(options.secrets ? { secrets: options.secrets } : {}),
    });
  }

  /** True while a connection is open or opening (for tests and status output). */
  get connected(): boolean {
    return this.#connection.isOpen;
  }

  async call(tool: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    if (ctx.signal.aborted) throw abortedError(ctx.signal);
    const site: CallSite = { server: this.prefix, tool };
    const toolArgs = toArguments(args, site);
    const meta: StepdCallMeta = {
      workflowId: ctx.workflowId,
      stepId: ctx.stepId,
      stepName: ctx.stepName,
      attempt: ctx.attempt,
      user: ctx.user,
      idempotencyKey: ctx.idempotencyKey,
      // The tool call's span (W3C trace context in _meta, as MCP's OpenTelemetry conventions carry it).
      ...(ctx.traceparent ? { traceparent: ctx.traceparent } : {}),
    };
    return this.#withSession(async (session) => {
      // The step's own signal, or the connection breaking under the call: whichever comes first.
      const signal = AbortSignal.any([ctx.signal, session.lost]);
      try {
        const info = await this.#requireTool(session, tool, signal);
        const params = { name: tool, arguments: toolArgs, _meta: meta };
        // Every call asks for progress (the SDK sends a progressToken); reports go to the step.
        const onprogress = (p: Progress) => ctx.onProgress?.(toolProgress(p, this.#secrets));
        const result = requiresTask(info)
          ? await callToolAsTask(session.client, params, site, { signal, timeoutMs: this.#callTimeoutMs, onprogress, log: this.#log, ...(this.#secrets ? { secrets: this.#secrets } : {}) })
          : await session.client.callTool(params, undefined, { signal, timeout: this.#callTimeoutMs, onprogress });
        // What the call spent, as the server reports it in the result's `_meta.usage` (recorded even when it failed).
        const usage = normalizeUsage((result as { _meta?: { usage?: unknown } })._meta?.usage);
        if (usage) ctx.reportUsage?.(usage);
        return toStepResult(result, site, this.#secrets);
      } catch (err) {
        throw this.#failure(err, session, site, ctx.signal);
      }
    }, ctx.signal);
  }

  /**
   * Runs `fn` on the shared session. When the server answers that it does not know the session
   * (it restarted, or expired it), that session is dropped and `fn` runs once more on a new one:
   * the server refused the request without running it, so sending it again is safe.
   */
  async #withSession<T>(fn: (session: Session) => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await this.#connection.use(fn, signal);
    } catch (err) {
      if (!(err instanceof SessionExpired)) throw err;
    }
    try {
      return await this.#connection.use(fn, signal);
    } catch (err) {
      throw err instanceof SessionExpired ? err.error : err;
    }
  }

  async list(): Promise<ToolInfo[]> {
    const site: CallSite = { server: this.prefix, tool: 'tools/list' };
    return this.#withSession(async (session) => {
      try {
        session.tools = await listAllTools(session.client, this.#listTimeoutMs, session.lost);
      } catch (err) {
        throw this.#failure(err, session, site, undefined);
      }
      return session.tools.map((t) => listedTool(t, this.#secrets));
    });
  }

  /** Connects and lists the tools, for start-up reporting. Never throws. */
  async probe(): Promise<McpProbeResult> {
    try {
      return { ok: true, tools: await this.list() };
    } catch (err) {
      return { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
  }

  async close(): Promise<void> {
    await this.#connection.close();
  }

  /** Checks `tool` against the cached list, listing again once in case the server's tools changed. */
  async #requireTool(session: Session, tool: string, signal: AbortSignal): Promise<Tool> {
    const known = session.tools.find((t) => t.name === tool);
    if (known) return known;
    session.tools = await listAllTools(session.client, this.#listTimeoutMs, signal);
    const listed = session.tools.find((t) => t.name === tool);
    if (listed) return listed;
    const names = session.tools.map((t) => t.name).sort();
    throw new StepError(
      'unknown_tool',
      `unknown tool "${this.prefix}.${tool}": MCP server "${this.prefix}" has ${names.length ? names.map((n) => `${this.prefix}.${n}`).join(', ') : 'no tools'}`,
      { retryable: false, details: { tool: `${this.prefix}.${tool}`, tools: names } },
    );
  }

  #failure(err: unknown, session: Session, site: CallSite, signal: AbortSignal | undefined): Error {
    if (err instanceof StepError) return err;
    if (signal?.aborted) return abortedError(signal);
    // The SDK wraps an abort reason in an McpError: the connection's own error says what happened.
    if (session.lost.aborted && session.lost.reason instanceof StepError) return session.lost.reason;
    const { error, reset } = classifyMcpError(err, site, this.#secrets);
    if (isSessionExpired(err)) {
      this.#connection.discard(session, `the server no longer knows the session (HTTP ${(err as { code?: number }).code ?? '?'}); opening a new one`);
      return new SessionExpired(error);
    }
    if (reset) this.#connection.discard(session, error.message);
    return error;
  }
}

/**
 * A server's tool as stepd lists it (stepd tools, list_tools, stepd validate): name, title,
 * description and schemas, with every secret of the config redacted — a server may echo the
 * headers it was sent (`Authorization: Bearer …`) into any of them. Calls use the raw listing.
 */
export function listedTool(tool: Tool, secrets: Secrets | undefined): ToolInfo {
  const title = tool.title ?? tool.annotations?.title;
  const info: ToolInfo = {
    name: tool.name,
    ...(title !== undefined ? { title } : {}),
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    inputSchema: tool.inputSchema,
    ...(tool.outputSchema !== undefined ? { outputSchema: tool.outputSchema } : {}),
  };
  return secrets ? secrets.redactValue(info) : info;
}

/** Whether a tool must be called as an MCP task (`execution.taskSupport: "required"`). */
export function requiresTask(tool: Pick<Tool, 'execution'> | undefined): boolean {
  return tool?.execution?.taskSupport === 'required';
}

/** An MCP progress notification as a step's progress report (the message redacted and cut). */
function toolProgress(p: Progress, secrets: Secrets | undefined): ToolProgress {
  const out: ToolProgress = { progress: p.progress };
  if (typeof p.total === 'number') out.total = p.total;
  if (typeof p.message === 'string' && p.message !== '') out.message = cutRemoteText(p.message, secrets, 500);
  return out;
}

function toArguments(args: unknown, site: CallSite): Record<string, unknown> {
  if (args === undefined || args === null) return {};
  if (typeof args === 'object' && !Array.isArray(args)) return args as Record<string, unknown>;
  throw new StepError('bad_args', `${site.server}.${site.tool} takes an object of arguments, got ${Array.isArray(args) ? 'an array' : typeof args}`, {
    retryable: false,
    details: { server: site.server, tool: site.tool },
  });
}

/** One provider per configured server, in the config's order. Nothing connects until first use. */
export function createMcpProviders(servers: Record<string, McpServerConfig> | undefined, options: McpProviderOptions): McpServerProvider[] {
  return Object.entries(servers ?? {}).map(([name, server]) => new McpServerProvider(name, server, options));
}
