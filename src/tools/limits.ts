/**
 * Per-tool-pattern and per-user maximums of running steps, tracked in memory by one executor.
 * The executor asks before it runs a claimed step; a step held back by a limit stays `ready`
 * and other steps behind it still run. The global `concurrency` is the size of the worker pool,
 * which the executor owns; this module only reports the configured value.
 */
import type { LimitsConfig } from '../configFile.js';
import { matchesToolPattern } from './permissions.js';

export type Release = () => void;

export interface LimitSnapshot {
  tools: Record<string, { running: number; max: number }>;
  users: Record<string, { running: number; max: number }>;
}

export interface LimitPolicy {
  /** The configured global concurrency; undefined means the caller's default. */
  readonly concurrency: number | undefined;
  /** True when no tool or user limit is configured (tryAcquire always succeeds). */
  readonly unlimited: boolean;
  /**
   * Reserves a slot for a step calling `tool` (null for steps without a tool) as `user`.
   * Returns a release function (idempotent) when every matching tool pattern and the user are
   * under their maximum, else null and nothing is reserved.
   */
  tryAcquire(tool: string | null, user: string | null): Release | null;
  /** Running counts per configured pattern and user, for logs and tests. */
  snapshot(): LimitSnapshot;
  /** Tool patterns and users at their maximum right now: the claim skips their steps. */
  saturated(): { toolPatterns: string[]; users: string[] };
}

export function createLimitPolicy(limits: LimitsConfig | undefined): LimitPolicy {
  const toolMax = new Map<string, number>(Object.entries(limits?.tools ?? {}));
  const userMax = new Map<string, number>(Object.entries(limits?.users ?? {}));
  const toolRunning = new Map<string, number>();
  const userRunning = new Map<string, number>();

  const matchingPatterns = (tool: string | null): string[] =>
    tool === null ? [] : [...toolMax.keys()].filter((p) => matchesToolPattern(p, tool));

  const inc = (counts: Map<string, number>, key: string, by: number): void => {
    const next = (counts.get(key) ?? 0) + by;
    if (next > 0) counts.set(key, next);
    else counts.delete(key);
  };

  return {
    concurrency: limits?.concurrency,
    unlimited: toolMax.size === 0 && userMax.size === 0,

    tryAcquire(tool, user) {
      const patterns = matchingPatterns(tool);
      for (const p of patterns) {
        if ((toolRunning.get(p) ?? 0) >= (toolMax.get(p) ?? Infinity)) return null;
      }
      const userKey = user !== null && userMax.has(user) ? user : null;
      if (userKey !== null && (userRunning.get(userKey) ?? 0) >= (userMax.get(userKey) ?? Infinity)) return null;

      for (const p of patterns) inc(toolRunning, p, 1);
      if (userKey !== null) inc(userRunning, userKey, 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        for (const p of patterns) inc(toolRunning, p, -1);
        if (userKey !== null) inc(userRunning, userKey, -1);
      };
    },

    saturated() {
      const full = (max: Map<string, number>, running: Map<string, number>) =>
        [...max].filter(([key, m]) => (running.get(key) ?? 0) >= m).map(([key]) => key);
      return { toolPatterns: full(toolMax, toolRunning), users: full(userMax, userRunning) };
    },

    snapshot() {
      const view = (max: Map<string, number>, running: Map<string, number>) =>
        Object.fromEntries([...max].map(([key, m]) => [key, { running: running.get(key) ?? 0, max: m }]));
      return { tools: view(toolMax, toolRunning), users: view(userMax, userRunning) };
    },
  };
}
