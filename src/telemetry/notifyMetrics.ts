/**
 * Webhook deliveries in /metrics (docs/operations.md, "Notifications"):
 * `stepd_notifications_sent_total{event}` (the hook answered 2xx) and
 * `stepd_notifications_failed_total{event, reason}` (`http_error`: it answered otherwise;
 * `unreachable`: no answer in time; `egress_denied`: the egress rules refused the URL, never retried), one per attempt, so a delivery refused once and then
 * accepted counts one of each (pg-boss retries it). The event label is one of NOTIFY_EVENTS
 * (`other` for anything else), so the series stay bounded; every one starts at 0.
 */
import { Counter, type Registry } from 'prom-client';
import { NOTIFY_EVENTS } from '../notify/notifyConfig.js';

export type DeliveryFailure = 'http_error' | 'unreachable' | 'egress_denied';
const FAILURES: readonly DeliveryFailure[] = ['http_error', 'unreachable', 'egress_denied'];

export class NotifyMetrics {
  private readonly sentTotal: Counter<'event'>;
  private readonly failedTotal: Counter<'event' | 'reason'>;

  constructor(registers: Registry[]) {
    this.sentTotal = new Counter({ name: 'stepd_notifications_sent_total', help: 'Webhook deliveries a hook accepted (answered 2xx), by event type.', labelNames: ['event'], registers });
    this.failedTotal = new Counter({
      name: 'stepd_notifications_failed_total',
      help: 'Webhook delivery attempts that failed (pg-boss retries them), by event type and reason: http_error (a non-2xx answer), unreachable (no answer in time), egress_denied (refused by the egress rules, not retried).',
      labelNames: ['event', 'reason'],
      registers,
    });
    for (const event of NOTIFY_EVENTS) {
      this.sentTotal.inc({ event }, 0);
      for (const reason of FAILURES) this.failedTotal.inc({ event, reason }, 0);
    }
  }

  sent(event: string): void {
    this.sentTotal.inc({ event: eventLabel(event) });
  }

  failed(event: string, reason: DeliveryFailure): void {
    this.failedTotal.inc({ event: eventLabel(event), reason });
  }
}

function eventLabel(event: string): string {
  return (NOTIFY_EVENTS as readonly string[]).includes(event) ? event : 'other';
}
