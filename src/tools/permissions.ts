/**
 * Who may call which tool. A step runs as its workflow's `created_by`; that user may call the
 * tools matching the config's `default` patterns plus those listed under their name. Without a
 * `permissions` section everything is allowed.
 */
import type { PermissionsConfig } from '../configFile.js';
import { StepError } from '../errors.js';
import { matchesToolPattern } from './matchesToolPattern.js';

export interface PermissionPolicy {
  /** True when no call can be denied (no permissions section, or `"*"` in `default`). */
  readonly allowsEverything: boolean;
  allows(user: string | null, tool: string): boolean;
  /** True when `user` may call at least one tool a server named `prefix` could have (`kb` for `kb.*`, `kb.search`, `k*`, `*`). */
  allowsSomeToolOf(user: string | null, prefix: string): boolean;
  /** Throws a non-retryable StepError `permission_denied` when `user` may not call `tool`. */
  check(user: string | null, tool: string): void;
}

export function createPermissionPolicy(permissions: PermissionsConfig | undefined): PermissionPolicy {
  if (!permissions) {
    return { allowsEverything: true, allows: () => true, allowsSomeToolOf: () => true, check: () => undefined };
  }
  const defaults = [...(permissions.default ?? [])];
  const users = new Map<string, string[]>(Object.entries(permissions.users ?? {}).map(([u, p]) => [u, [...p]]));
  const allowsEverything = defaults.includes('*');

  const patternsOf = (user: string | null): string[] => [...defaults, ...((user === null ? undefined : users.get(user)) ?? [])];
  const allows = (user: string | null, tool: string): boolean => patternsOf(user).some((p) => matchesToolPattern(p, tool));

  return {
    allowsEverything,
    allows,
    allowsSomeToolOf: (user, prefix) => patternsOf(user).some((p) => patternReachesServer(p, prefix)),
    check(user, tool) {
      if (allows(user, tool)) return;
      const who = user === null ? 'a workflow without created_by' : `user "${user}"`;
      throw new StepError('permission_denied', `${who} may not call tool "${tool}"`, {
        retryable: false,
        details: { user, tool },
      });
    },
  };
}

/** Whether a tool pattern can match some tool of the server `prefix` (`kb.search`, `kb.*`, `k*` and `*` can for `kb`). */
export function patternReachesServer(pattern: string, prefix: string): boolean {
  const server = `${prefix}.`;
  if (!pattern.endsWith('*')) return pattern.startsWith(server) && pattern.length > server.length;
  const stem = pattern.slice(0, -1);
  return server.startsWith(stem) || stem.startsWith(server);
}

/** A tool pattern as a SQL LIKE pattern (`kb.*` → `kb.%`), with LIKE's own wildcards escaped. */
export function toolPatternToLike(pattern: string): string {
  if (pattern === '*') return '%';
  const star = pattern.endsWith('*');
  const body = (star ? pattern.slice(0, -1) : pattern).replace(/[\\%_]/g, (c) => `\\${c}`);
  return star ? `${body}%` : body;
}
