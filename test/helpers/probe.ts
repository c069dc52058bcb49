/**
 * An in-process tool provider that counts its calls in flight: `probe.hold` waits `ms` (or until
 * released) and records the most calls it saw at once, overall, per user and per executor-visible
 * step. One instance shared by several executors counts across all of them.
 */
import type { ToolContext, ToolInfo, ToolProvider } from '../../src/tools/tool.js';

export class ProbeTools implements ToolProvider {
  readonly prefix = 'probe';
  inFlight = 0;
  max = 0;
  calls = 0;
  readonly byUser = new Map<string, { now: number; max: number }>();
  private readonly waiters: (() => void)[] = [];
  private held = false;

  /** From now on, `hold` calls without `ms` wait until `releaseAll()`. */
  holdUntilReleased(): void {
    this.held = true;
  }

  releaseAll(): void {
    this.held = false;
    for (const w of this.waiters.splice(0)) w();
  }

  async list(): Promise<ToolInfo[]> {
    return [{ name: 'hold' }];
  }

  async call(_tool: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    const ms = (args as { ms?: unknown } | null)?.ms;
    const user = ctx.user ?? '';
    const u = this.byUser.get(user) ?? { now: 0, max: 0 };
    this.byUser.set(user, u);
    this.calls++;
    this.inFlight++;
    u.now++;
    this.max = Math.max(this.max, this.inFlight);
    u.max = Math.max(u.max, u.now);
    try {
      if (typeof ms === 'number') await new Promise((r) => setTimeout(r, ms));
      else if (this.held) await new Promise<void>((r) => this.waiters.push(r));
      return { ok: true };
    } finally {
      this.inFlight--;
      u.now--;
    }
  }
}
