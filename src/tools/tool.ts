/**
 * The interface every tool source plugs into: built-ins, HTTP, MCP servers.
 * A step's `tool` is "server.tool"; the registry finds the provider for "server".
 */

export interface ToolContext {
  workflowId: string;
  stepId: string;
  stepName: string;
  attempt: number;
  /** The workflow's created_by: the user the step runs as. */
  user: string | null;
  /** The same on every attempt of one step (`${workflowId}:${stepName}:${firstAttemptId}`): tools use it to skip work a lost attempt already did. */
  idempotencyKey: string;
  /** Aborted on step timeout, cancellation of the workflow, or forced shutdown. */
  signal: AbortSignal;
  /**
   * Reports how far the call has got (an MCP server's notifications/progress, for one). Call it
   * as often as you like: the executor keeps the latest, writes it to the step row throttled and
   * emits `step.progress`; reports after the call returned are ignored. Absent outside the executor.
   */
  onProgress?: (progress: ToolProgress) => void;
  /**
   * The W3C traceparent of the tool call's span when tracing is on: `http.request` sends it as a
   * header, MCP calls in `_meta`. Absent when not traced.
   */
  traceparent?: string;
}

/** One progress report: `progress` so far (a number that grows), of `total` when known. */
export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** A tool as listed (an MCP server's listing is redacted of the config's secrets before it is one). */
export interface ToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
}

/** A source of tools sharing one prefix (`core`, `http`, an MCP server name). */
export interface ToolProvider {
  readonly prefix: string;
  /** Calls `tool` (the part after the prefix). Throws StepError on failure. */
  call(tool: string, args: unknown, ctx: ToolContext): Promise<unknown>;
  /**
   * Whether `tool` answers at once, without waiting on I/O (core.echo, core.noop): its steps take
   * no tool slot, like gates and timers. Absent: no tool of this provider is instant.
   */
  isInstant?(tool: string): boolean;
  /**
   * Whether `tool` is served by worker processes (config `workers`, sql/0027) rather than called
   * here; with the timeout its steps get when the flow sets none. Absent: called here.
   */
  servedByWorkers?(tool: string): { timeoutMs?: number } | undefined;
  /** Lists the tools this provider has (may connect). */
  list(): Promise<ToolInfo[]>;
  /** Releases connections; called once on shutdown. */
  close?(): Promise<void>;
}
