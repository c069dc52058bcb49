/**
 * One lazily opened, shared connection to an MCP server. The first user opens it; concurrent
 * users wait on that same connect; a closed or broken connection is forgotten so the next user
 * opens a new one; it closes after `idleMs` without users, and for good on `close()`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { isHttpServer, type McpServerConfig } from '../../configFile.js';
import { StepError } from '../../errors.js';
import { cutRemoteText, type Secrets } from '../../secrets.js';
import { raceAbort, remoteMessage } from './results.js';
import { answerServerRequests, STEPD_CLIENT_CAPABILITIES } from './serverRequests.js';
import { watchedFetch } from './streamWatch.js';

export interface Session {
  readonly client: Client;
  readonly id: number;
  /** The server's tools as last listed. */
  tools: Tool[];
  /**
   * Aborts, with a retryable `mcp_connection_lost` StepError as its reason, when the connection
   * broke under a call (an HTTP server's answer stream dropped): calls pass it to the SDK so they
   * fail at once instead of waiting for their timeout.
   */
  readonly lost: AbortSignal;
}

export interface McpConnectionOptions {
  name: string;
  server: McpServerConfig;
  log: Logger;
  /** Close the connection after this long without calls (Infinity: never). */
  idleMs: number;
  connectTimeoutMs: number;
  clientInfo: { name: string; version: string };
  /** Redacted from the server's error text (cut to about 1 kB) before it is logged or stored. */
  secrets?: Secrets;
}

export class McpConnection {
  readonly #opts: McpConnectionOptions;
  readonly #log: Logger;
  #pending: Promise<Session> | undefined;
  #current: Session | undefined;
  #users = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #nextId = 1;
  /** Clients still connecting: close() stops them instead of waiting out the connect timeout. */
  readonly #connecting = new Set<Client>();

  constructor(opts: McpConnectionOptions) {
    this.#opts = opts;
    this.#log = opts.log;
  }

  /** True while a session is open (or opening). */
  get isOpen(): boolean {
    return this.#pending !== undefined;
  }

  /** Runs `fn` on the shared session, opening it first when needed. `signal` stops the wait only. */
  async use<T>(fn: (session: Session) => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.#closed) {
      throw new StepError('mcp_closed', `MCP server "${this.#opts.name}" is shut down`, { retryable: true });
    }
    this.#users++;
    this.#clearIdle();
    try {
      const session = await raceAbort(this.#open(), signal);
      return await fn(session);
    } finally {
      this.#users--;
      if (this.#users === 0) this.#scheduleIdle();
    }
  }

  /** Drops `session` (when it is still the current one) so the next user reconnects. */
  discard(session: Session, reason: string): void {
    if (this.#current !== session) return;
    this.#forget();
    this.#log.warn({ server: this.#opts.name, session: session.id, reason }, 'mcp connection dropped');
    void this.#closeSession(session);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#clearIdle();
    const pending = this.#pending;
    this.#forget();
    // A server that has not answered yet must not hold up shutdown: closing its client makes
    // the pending connect fail now (and stops a stdio server's process).
    await Promise.allSettled([...this.#connecting].map((client) => client.close()));
    const session = await pending?.catch(() => undefined);
    if (session) await this.#closeSession(session);
  }

  #open(): Promise<Session> {
    if (!this.#pending) {
      const pending = this.#connect();
      this.#pending = pending;
      pending.then(
        (session) => {
          if (this.#pending !== pending) return;
          this.#current = session;
          if (this.#users === 0) this.#scheduleIdle();
        },
        () => {
          if (this.#pending === pending) this.#pending = undefined;
        },
      );
    }
    return this.#pending;
  }

  #forget(): void {
    this.#pending = undefined;
    this.#current = undefined;
  }

  async #connect(): Promise<Session> {
    const { name, clientInfo, connectTimeoutMs } = this.#opts;
    const id = this.#nextId++;
    const log = this.#log.child({ server: name, session: id });
    const client = new Client(clientInfo, { capabilities: STEPD_CLIENT_CAPABILITIES });
    answerServerRequests(client, log, this.#opts.secrets);
    const lost = new AbortController();
    const session: Session = { client, id, tools: [], lost: lost.signal };
    // The SDK's errors carry the server's reply: only its redacted, cut message is logged.
    client.onerror = (err) => log.debug({ error: remoteMessage(err, this.#opts.secrets) }, 'mcp transport reported an error');
    client.onclose = () => {
      if (this.#current === session) {
        this.#forget();
        log.warn('mcp connection closed by the server');
      }
    };
    const started = Date.now();
    this.#connecting.add(client);
    try {
      // A connection lost while initializing fails the connect now, not at its timeout.
      await client.connect(this.#transport(log, (err) => this.#lost(session, lost, err)), { timeout: connectTimeoutMs, signal: lost.signal });
      session.tools = await listAllTools(client, connectTimeoutMs, lost.signal);
    } catch (err) {
      await client.close().catch(() => undefined);
      if (this.#closed) throw new StepError('mcp_closed', `MCP server "${name}" is shut down`, { retryable: true });
      const message = lost.signal.aborted ? 'the connection was lost while connecting' : remoteMessage(err, this.#opts.secrets);
      log.warn({ error: message }, 'mcp connect failed');
      throw new StepError('mcp_unavailable', `MCP server "${name}" could not be reached: ${message}`, {
        retryable: true,
        details: { server: name },
      });
    } finally {
      this.#connecting.delete(client);
    }
    if (this.#closed) {
      await this.#closeSession(session);
      throw new StepError('mcp_closed', `MCP server "${name}" is shut down`, { retryable: true });
    }
    log.info({ tools: session.tools.length, ms: Date.now() - started }, 'mcp connected');
    return session;
  }

  /**
   * The server went away under a call: every call in flight on `session` fails now (through
   * `session.lost`), the session is forgotten so the next call opens a new one, and one warn
   * line says so.
   */
  #lost(session: Session, lost: AbortController, err: unknown): void {
    if (lost.signal.aborted) return;
    const { name, secrets } = this.#opts;
    const message = remoteMessage(err, secrets);
    lost.abort(
      new StepError('mcp_connection_lost', `the connection to MCP server "${name}" was lost during the call: ${message}`, {
        retryable: true,
        details: { server: name },
      }),
    );
    this.#log.warn({ server: name, session: session.id, error: message }, 'mcp connection lost during a call');
    if (this.#current !== session) return;
    this.#forget();
    void this.#closeSession(session);
  }

  #transport(log: Logger, onDropped: (err: unknown) => void): Transport {
    const { server } = this.#opts;
    if (isHttpServer(server)) {
      return new StreamableHTTPClientTransport(new URL(server.url), {
        fetch: watchedFetch(onDropped),
        ...(server.headers ? { requestInit: { headers: server.headers } } : {}),
      });
    }
    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args ?? [],
      env: { ...getDefaultEnvironment(), ...server.env },
      ...(server.cwd === undefined ? {} : { cwd: server.cwd }),
      stderr: 'pipe',
    });
    // Always drain the child's stderr (a full pipe would block it) and log it line by line.
    let partial = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) log.info({ stderr: cutRemoteText(line, this.#opts.secrets) }, 'mcp server stderr');
    });
    return transport;
  }

  async #closeSession(session: Session): Promise<void> {
    const transport = session.client.transport;
    try {
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
        // Tell the server the session is over, but never wait long on a server that went away.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          transport.terminateSession().catch(() => undefined),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, 1000);
          }),
        ]);
        clearTimeout(timer);
      }
      await session.client.close();
    } catch (err) {
      this.#log.debug({ error: remoteMessage(err, this.#opts.secrets), server: this.#opts.name, session: session.id }, 'mcp close failed');
    }
  }

  #scheduleIdle(): void {
    const { idleMs } = this.#opts;
    this.#clearIdle();
    if (this.#closed || !Number.isFinite(idleMs) || !this.#pending) return;
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      const session = this.#current;
      if (this.#users > 0 || !session) return;
      this.#forget();
      this.#log.info({ server: this.#opts.name, session: session.id, idleMs }, 'mcp connection closed after idling');
      void this.#closeSession(session);
    }, idleMs);
    this.#idleTimer.unref();
  }

  #clearIdle(): void {
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }
}

/** tools/list, following pagination cursors. */
export async function listAllTools(client: Client, timeoutMs: number, signal?: AbortSignal): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs, ...(signal ? { signal } : {}) });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}
