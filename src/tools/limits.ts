/**
 * The config's limits on running tool steps: a global maximum (`limits.concurrency`), a maximum
 * per tool pattern, per named user, and `limits.defaultUser` for every other user.
 *
 * The executor enforces them across every executor on the database: its claim counts the
 * running rows under a transaction-scoped advisory lock, seeds a tally with those counts, and
 * claims only the candidates the tally has room for (src/executor/claims/claimSteps.ts). This module
 * is the pure part: which limits a step falls under, and a tally that counts against them.
 * Steps without a tool (readied gates, due timers) complete at once and never count.
 */
import type { LimitsConfig } from '../configFile.js';
import { matchesToolPattern } from './matchesToolPattern.js';

export type Release = () => void;

export interface LimitSnapshot {
  tools: Record<string, { running: number; max: number }>;
  users: Record<string, { running: number; max: number }>;
}

/** Counts running steps against the limits; `tryAcquire` takes room only when every limit has it. */
export interface LimitTally {
  /** Counts `n` steps already running (as the database reports them). */
  add(tool: string | null, user: string | null, n: number): void;
  /**
   * Reserves room for a step calling `tool` (null for steps without a tool) as `user`. Returns
   * a release function (idempotent) when every matching limit is under its maximum, else null
   * and nothing is reserved.
   */
  tryAcquire(tool: string | null, user: string | null): Release | null;
  /** Tool patterns and users at their maximum right now: a claim skips their steps. */
  saturated(): { toolPatterns: string[]; users: string[]; global: boolean };
  snapshot(): LimitSnapshot;
}

export interface LimitPolicy extends LimitTally {
  /** The configured global concurrency (every executor together); undefined when not set. */
  readonly concurrency: number | undefined;
  /** True when no limit at all is configured: claims take the fast path. */
  readonly unlimited: boolean;
  /** Whether any configured limit applies to a step calling `tool` as `user`. */
  applies(tool: string | null, user: string | null): boolean;
  /** A fresh tally (nothing counted) over the same limits: one per claim. */
  tally(): LimitTally;
}

/** The key a user is counted under: a named user, or everyone else under `defaultUser`. */
const ANONYMOUS = '';

function createTally(limits: LimitsConfig | undefined): LimitTally {
  const toolMax = new Map<string, number>(Object.entries(limits?.tools ?? {}));
  const userMax = new Map<string, number>(Object.entries(limits?.users ?? {}));
  const defaultUser = limits?.defaultUser;
  const globalMax = limits?.concurrency;
  const toolRunning = new Map<string, number>();
  const userRunning = new Map<string, number>();
  let globalRunning = 0;

  const patternsOf = (tool: string | null): string[] => (tool === null ? [] : [...toolMax.keys()].filter((p) => matchesToolPattern(p, tool)));
  const userKeyOf = (user: string | null): { key: string; max: number } | null => {
    const key = user ?? ANONYMOUS;
    const max = userMax.get(key) ?? defaultUser;
    return max === undefined ? null : { key, max };
  };
  const inc = (counts: Map<string, number>, key: string, by: number): void => {
    const next = (counts.get(key) ?? 0) + by;
    if (next > 0) counts.set(key, next);
    else counts.delete(key);
  };
  const count = (patterns: string[], userKey: string | null, global: boolean, by: number): void => {
    for (const p of patterns) inc(toolRunning, p, by);
    if (userKey !== null) inc(userRunning, userKey, by);
    if (global) globalRunning += by;
  };

  return {
    add(tool, user, n) {
      count(patternsOf(tool), userKeyOf(user)?.key ?? null, tool !== null && globalMax !== undefined, n);
    },

    tryAcquire(tool, user) {
      const patterns = patternsOf(tool);
      for (const p of patterns) {
        if ((toolRunning.get(p) ?? 0) >= (toolMax.get(p) ?? Infinity)) return null;
      }
      const userLimit = userKeyOf(user);
      if (userLimit !== null && (userRunning.get(userLimit.key) ?? 0) >= userLimit.max) return null;
      const global = tool !== null && globalMax !== undefined;
      if (global && globalRunning >= globalMax) return null;

      const userKey = userLimit?.key ?? null;
      count(patterns, userKey, global, 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        count(patterns, userKey, global, -1);
      };
    },

    saturated() {
      const full = (max: Map<string, number>, running: Map<string, number>) =>
        [...max].filter(([key, m]) => (running.get(key) ?? 0) >= m).map(([key]) => key);
      const users = full(userMax, userRunning);
      // Users under defaultUser are saturated one by one, as the running counts show them.
      if (defaultUser !== undefined) {
        for (const [key, n] of userRunning) if (!userMax.has(key) && n >= defaultUser && key !== ANONYMOUS) users.push(key);
      }
      return { toolPatterns: full(toolMax, toolRunning), users, global: globalMax !== undefined && globalRunning >= globalMax };
    },

    snapshot() {
      const view = (max: Map<string, number>, running: Map<string, number>) =>
        Object.fromEntries([...max].map(([key, m]) => [key, { running: running.get(key) ?? 0, max: m }]));
      const users = view(userMax, userRunning);
      if (defaultUser !== undefined) {
        for (const [key, n] of userRunning) if (!userMax.has(key)) users[key] = { running: n, max: defaultUser };
      }
      return { tools: view(toolMax, toolRunning), users };
    },
  };
}

export function createLimitPolicy(limits: LimitsConfig | undefined): LimitPolicy {
  const own = createTally(limits);
  const hasTools = Object.keys(limits?.tools ?? {}).length > 0;
  const hasUsers = Object.keys(limits?.users ?? {}).length > 0 || limits?.defaultUser !== undefined;
  const hasGlobal = limits?.concurrency !== undefined;
  const toolPatterns = Object.keys(limits?.tools ?? {});
  const userNames = new Set(Object.keys(limits?.users ?? {}));

  return {
    ...own,
    concurrency: limits?.concurrency,
    unlimited: !hasTools && !hasUsers && !hasGlobal,
    applies(tool, user) {
      if (tool === null) return false;
      if (hasGlobal || limits?.defaultUser !== undefined) return true;
      if (user !== null && userNames.has(user)) return true;
      return toolPatterns.some((p) => matchesToolPattern(p, tool));
    },
    tally: () => createTally(limits),
  };
}
