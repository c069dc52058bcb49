/**
 * The config's `notify` section and its approval links (docs/operations.md, "Notifications"):
 *   "notify": [ { "on": ["step.waiting", "workflow.failed"], "url": "https://…", "secret": "${HOOK_SECRET}" } ],
 *   "approvalLinks": { "baseUrl": "https://stepd.example.com", "expiresIn": "24h" }
 * The secret is a `${VAR}` like every other (expanded, then redacted from logs as a secret). Pure.
 */
import { z } from 'zod';
import { durationText } from '../durationText.js';

export const NOTIFY_EVENTS = ['step.waiting', 'workflow.failed'] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

export const MIN_HOOK_SECRET_LENGTH = 16;

export const notifySchema = z.array(
  z.strictObject({
    on: z.array(z.enum(NOTIFY_EVENTS)).min(1, 'name at least one event: "step.waiting" or "workflow.failed"'),
    url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
    secret: z.string().min(MIN_HOOK_SECRET_LENGTH, `must be at least ${MIN_HOOK_SECRET_LENGTH} characters; use a long random value from the environment ("\${HOOK_SECRET}")`),
  }),
);

export const approvalLinksSchema = z.strictObject({
  /** Where the daemon's HTTP server is reached by whoever gets the notification (default: its own --http URL). */
  baseUrl: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
  /** How long a link works (default 24h). */
  expiresIn: durationText.pipe(z.number().min(1_000, 'at least 1s').max(30 * 86_400_000, 'at most 30d')).optional(),
});

export type NotifyHook = z.infer<typeof notifySchema>[number];
export type ApprovalLinksConfig = z.infer<typeof approvalLinksSchema>;

export const DEFAULT_LINK_TTL_MS = 24 * 3_600_000;
