/**
 * The hint added to a flow's "Unrecognized key" issue when the key is a capacity knob that lives
 * elsewhere (priority on the row, rate limits in the config, keyed concurrency's shape).
 */
/** Keys people write for capacity in a flow, and where that knob lives instead. */
const MISPLACED: Record<string, string> = {
  priority: 'priority is set on the workflow row when it is inserted (workflows.priority, capped per role by clients.ROLE.maxPriority), not in the flow',
  rateLimit: 'rate limits are set in the config, per tool pattern: "limits": { "rates": { "TOOL": "60/m" } }',
  rateLimits: 'rate limits are set in the config, per tool pattern: "limits": { "rates": { "TOOL": "60/m" } }',
  rate: 'rate limits are set in the config, per tool pattern: "limits": { "rates": { "TOOL": "60/m" } }',
  throttle: 'rate limits are set in the config, per tool pattern: "limits": { "rates": { "TOOL": "60/m" } }',
  concurrencyKey: 'a key limit is written "concurrency": { "key": "TEMPLATE", "limit": N }',
};

/** An "Unrecognized key" message, with where a misplaced capacity knob belongs. */
export function withCapacityHint(message: string): string {
  const m = /^Unrecognized keys?: "([^"]+)"/.exec(message);
  const hint = m ? MISPLACED[m[1]!] : undefined;
  return hint ? `${message}: ${hint}` : message;
}
