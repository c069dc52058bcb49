/**
 * Starts the daemon's notifier (notifier.ts) when the config has `notify`, in the background: a
 * pg-boss that cannot start (the schema missing or old: `stepd migrate`) is retried with
 * back-off and never stops the executor; events wait in the outbox meanwhile (an hour at most).
 */
import { backoffMs } from '../executor/core/dbOutage.js';
import type { HttpPolicyConfig } from '../configFile.js';
import type { Logger } from '../logger.js';
import { EgressPolicy } from '../tools/egress.js';
import type { ApprovalLinksConfig, NotifyHook } from './notifyConfig.js';
import { Notifier, type NotifierOptions } from './notifier.js';

export interface RunningNotifications {
  stop(): Promise<void>;
}

export function startNotifications(opts: {
  databaseUrl: string;
  schema: string;
  log: Logger;
  hooks: readonly NotifyHook[];
  links?: ApprovalLinksConfig | undefined;
  /** The daemon's own HTTP URL (--http), the links' default base. */
  httpUrl?: string | undefined;
  /** The daemon's delivery counters (when it serves /metrics). */
  metrics?: NotifierOptions['metrics'];
  /** The config's `http` policy: webhooks obey the same egress rules as http.request. */
  http?: HttpPolicyConfig | undefined;
}): RunningNotifications {
  const egress = new EgressPolicy({ policy: opts.http });
  const linkBaseUrl = opts.links?.baseUrl ?? opts.httpUrl;
  if (!linkBaseUrl) opts.log.info({}, 'notifications without approval links: the daemon serves no HTTP (--http) and approvalLinks.baseUrl is not set');
  let stopping = false;
  let current: Notifier | undefined;
  let wake: (() => void) | undefined;
  const loop = (async () => {
    for (let attempt = 1; !stopping; attempt++) {
      const n = new Notifier({
        databaseUrl: opts.databaseUrl,
        schema: opts.schema,
        log: opts.log,
        hooks: opts.hooks,
        egress,
        ...(linkBaseUrl ? { linkBaseUrl } : {}),
        ...(opts.links?.expiresIn !== undefined ? { linkTtlMs: opts.links.expiresIn } : {}),
        ...(opts.metrics ? { metrics: opts.metrics } : {}),
      });
      try {
        await n.start();
        current = n;
        return;
      } catch (err) {
        await n.stop().catch(() => {});
        const delayMs = backoffMs(attempt, 30_000);
        opts.log.warn({ err, delayMs }, 'notifications could not start (pg-boss); retrying (run `stepd migrate` if its schema is missing or old)');
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, delayMs);
          wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
    }
  })();
  return {
    async stop() {
      stopping = true;
      wake?.();
      await loop;
      await current?.stop();
    },
  };
}
