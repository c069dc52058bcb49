/**
 * Flags + environment → one frozen, validated executor configuration. Flags win over the
 * environment, the environment over defaults. Durations accept "500ms", "2s", "5m".
 */
import os from 'node:os';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import { parseDuration } from './flow/duration.js';
import { DEFAULT_EXECUTOR_OPTIONS, type ExecutorOptions } from './executor/options.js';

export const DEFAULT_SCHEMA = 'stepd';

export interface StartFlags {
  databaseUrl?: string;
  schema?: string;
  executorId?: string;
  concurrency?: string;
  pollInterval?: string;
  watchdogInterval?: string;
  leaseGrace?: string;
  shutdownGrace?: string;
  heartbeatInterval?: string;
  deadAfter?: string;
  events?: boolean;
}

const durationValue = z.string().transform((v, ctx) => {
  try {
    return parseDuration(/^\d+$/.test(v) ? Number(v) : v);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

const settings = z.object({
  schema: z.string().regex(/^[a-z_][a-z0-9_]{0,53}$/, 'lower-case letters, digits and _, starting with a letter or _, at most 54 characters (its roles add _executor)'),
  executorId: z.string().min(1).max(200),
  concurrency: z.coerce.number().int().min(1).max(10_000),
  pollIntervalMs: durationValue.pipe(z.number().min(10, 'at least 10ms')),
  watchdogIntervalMs: durationValue.pipe(z.number().min(10, 'at least 10ms')),
  leaseGraceMs: durationValue.pipe(z.number().min(0)),
  shutdownGraceMs: durationValue.pipe(z.number().min(0)),
  heartbeatIntervalMs: durationValue.pipe(z.number().min(10, 'at least 10ms').max(3_600_000, 'at most 1h')),
  deadAfterMs: durationValue.pipe(z.number().min(20, 'at least 20ms').max(86_400_000, 'at most 24h')),
});

/** An executor beating every `heartbeatIntervalMs` must not be presumed dead between two beats. */
const liveness = settings.refine((s) => s.deadAfterMs >= 2 * s.heartbeatIntervalMs, {
  path: ['deadAfterMs'],
  message: 'must be at least twice the heartbeat interval',
});

/** Resolves the database URL: --database-url, else DATABASE_URL; undefined means embedded. */
export function databaseUrlFrom(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const url = flag ?? env.DATABASE_URL;
  return url && url.trim() ? url.trim() : undefined;
}

export function schemaFrom(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const schema = flag ?? env.STEPD_SCHEMA ?? DEFAULT_SCHEMA;
  const parsed = settings.shape.schema.safeParse(schema);
  if (!parsed.success) throw new ConfigError('invalid settings', [{ path: 'schema', message: parsed.error.issues[0]?.message ?? 'invalid' }]);
  return schema;
}

export function executorOptionsFrom(
  flags: StartFlags,
  databaseUrl: string,
  env: NodeJS.ProcessEnv = process.env,
): Readonly<ExecutorOptions> {
  const d = DEFAULT_EXECUTOR_OPTIONS;
  const raw = {
    schema: flags.schema ?? env.STEPD_SCHEMA ?? DEFAULT_SCHEMA,
    executorId: flags.executorId ?? env.STEPD_EXECUTOR_ID ?? os.hostname(),
    concurrency: flags.concurrency ?? env.STEPD_CONCURRENCY ?? String(d.concurrency),
    pollIntervalMs: flags.pollInterval ?? env.STEPD_POLL_INTERVAL ?? `${d.pollIntervalMs}ms`,
    watchdogIntervalMs: flags.watchdogInterval ?? env.STEPD_WATCHDOG_INTERVAL ?? `${d.watchdogIntervalMs}ms`,
    leaseGraceMs: flags.leaseGrace ?? env.STEPD_LEASE_GRACE ?? `${d.leaseGraceMs}ms`,
    shutdownGraceMs: flags.shutdownGrace ?? env.STEPD_SHUTDOWN_GRACE ?? `${d.shutdownGraceMs}ms`,
    heartbeatIntervalMs: flags.heartbeatInterval ?? env.STEPD_HEARTBEAT_INTERVAL ?? `${d.heartbeatIntervalMs}ms`,
    deadAfterMs: flags.deadAfter ?? env.STEPD_DEAD_AFTER ?? `${d.deadAfterMs}ms`,
  };
  const parsed = liveness.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(
      'invalid settings',
      parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: `${i.message} (got ${JSON.stringify((raw as Record<string, unknown>)[String(i.path[0])])})` })),
    );
  }
  return Object.freeze({
    ...parsed.data,
    databaseUrl,
    admitBatch: d.admitBatch,
    emitEvents: flags.events ?? (env.STEPD_EVENTS === undefined ? d.emitEvents : env.STEPD_EVENTS !== 'off'),
  });
}
