/**
 * The config file's `workers` section: tool prefixes served by worker processes through the SQL
 * worker contract (sql/0027, docs/workers.md), each with the timeout its steps get when the flow
 * does not set one:
 *
 *   "workers": { "billing": { "timeout": "5m" } }
 *
 * A step calling `billing.charge` is then not run by the executor: it waits, taking no executor
 * slot, until a worker takes it. Pure: the schema and the checks against the other sections.
 */
import { z } from 'zod';
import { parseDuration } from '../flow/duration.js';

const PREFIX = /^[A-Za-z][A-Za-z0-9_-]*$/;

/** The longest worker step timeout: the database keeps it in milliseconds as an integer. */
export const MAX_WORKER_TIMEOUT_MS = 2_147_483_647;

const timeoutSchema = z.union([z.string(), z.number()]).superRefine((value, ctx) => {
  try {
    const ms = parseDuration(value);
    if (ms <= 0) ctx.addIssue({ code: 'custom', message: 'timeout must be greater than zero' });
    else if (ms > MAX_WORKER_TIMEOUT_MS) ctx.addIssue({ code: 'custom', message: 'timeout must be at most 24 days' });
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
  }
});

export const workerPrefixSchema = z.strictObject({
  /** The timeout of a step of this prefix whose flow sets none ("5m", or milliseconds). */
  timeout: timeoutSchema.optional(),
});

export const workersSchema = z.record(z.string().regex(PREFIX, 'a worker tool prefix is a name like "billing" (letters, digits, _ and -)'), workerPrefixSchema);

export type WorkersConfig = z.infer<typeof workersSchema>;

/** One worker prefix as the executor uses it. */
export interface WorkerPrefix {
  prefix: string;
  /** Undefined: the step's own timeout (the flow's, else the default) applies. */
  timeoutMs?: number;
}

/** The prefixes of a parsed `workers` section. */
export function workerPrefixes(config: WorkersConfig | undefined): WorkerPrefix[] {
  return Object.entries(config ?? {}).map(([prefix, c]) => (c.timeout === undefined ? { prefix } : { prefix, timeoutMs: parseDuration(c.timeout) }));
}

/**
 * What the `workers` section may not say given the rest of the file: a built-in prefix (`core`,
 * `http`) or the name of an MCP server (a tool has one source).
 */
export function workerConfigIssues(workers: unknown, reserved: readonly string[], mcpServers: unknown): { path: string; message: string }[] {
  if (typeof workers !== 'object' || workers === null || Array.isArray(workers)) return [];
  const servers = typeof mcpServers === 'object' && mcpServers !== null ? Object.keys(mcpServers) : [];
  const issues: { path: string; message: string }[] = [];
  for (const prefix of Object.keys(workers)) {
    if (reserved.includes(prefix)) issues.push({ path: `workers.${prefix}`, message: `"${prefix}" is a built-in tool prefix; workers cannot serve it` });
    else if (servers.includes(prefix)) issues.push({ path: `workers.${prefix}`, message: `"${prefix}" is also an MCP server in mcpServers; a tool prefix has one source` });
  }
  return issues;
}
