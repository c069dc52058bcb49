/**
 * Which outcomes the outcome queue (outcomeQueue.ts) records next: round-robin across lanes (an
 * outcome's lane is its workflow's role; within a role, its users take turns), so an outcome waits for at most the batch being
 * recorded and its own, however many of another role's arrived before it. With the batch sized
 * by a BatchPace (batchPace.ts), one role's heavy outcomes (a node of a sub-workflow tree
 * starting its children) never hold another role's back for long.
 */

/**
 * Takes batches round-robin across lanes: the lanes least recently served go first, so even
 * batches of one outcome alternate between roles. One per queue (it remembers which lane each
 * batch served), never shared.
 */
export class OutcomeLanes {
  private batches = 0;
  /** The batch that last took an outcome of each lane (lanes with nothing waiting are forgotten). */
  private readonly servedIn = new Map<string, number>();

  /**
   * Removes up to `max` entries from `pending` (oldest first within a lane, one of each lane in
   * turn, least recently served lane first) and returns them; the others stay in `pending`, in
   * their order. With a single lane this is the oldest `max`.
   */
  take<T extends { input: { lane?: string | undefined; user?: string | null | undefined } }>(pending: T[], max: number): T[] {
    this.batches++;
    const byRole = new Map<string, Map<string, number[]>>();
    for (let i = 0; i < pending.length; i++) {
      const { lane = '', user } = pending[i]!.input;
      const users = byRole.get(lane) ?? byRole.set(lane, new Map()).get(lane)!;
      const at = users.get(user ?? '');
      if (at) at.push(i);
      else users.set(user ?? '', [i]);
    }
    // Within a role, its users in turn (oldest first within a user).
    const lanes = new Map<string, number[]>();
    for (const [role, users] of byRole) lanes.set(role, interleave([...users.values()]));
    for (const key of this.servedIn.keys()) if (!lanes.has(key)) this.servedIn.delete(key);
    if (lanes.size <= 1 && byRole.values().next().value?.size === 1) {
      for (const key of lanes.keys()) this.servedIn.set(key, this.batches);
      return pending.splice(0, max);
    }
    const order = [...lanes.keys()].sort((a, b) => (this.servedIn.get(a) ?? 0) - (this.servedIn.get(b) ?? 0));
    const chosen = new Set<number>();
    for (let turn = 0; chosen.size < max; turn++) {
      let any = false;
      for (const key of order) {
        const q = lanes.get(key)!;
        if (turn < q.length && chosen.size < max) {
          chosen.add(q[turn]!);
          this.servedIn.set(key, this.batches);
          any = true;
        }
      }
      if (!any) break;
    }
    const taken: T[] = [];
    const kept: T[] = [];
    pending.forEach((e, i) => (chosen.has(i) ? taken : kept).push(e));
    pending.splice(0, pending.length, ...kept);
    return taken;
  }
}

/** The lists' elements in turns: the first of each, then the second of each, … */
function interleave(lists: number[][]): number[] {
  if (lists.length === 1) return lists[0]!;
  const out: number[] = [];
  const total = lists.reduce((n, l) => n + l.length, 0);
  for (let turn = 0; out.length < total; turn++) {
    for (const l of lists) if (turn < l.length) out.push(l[turn]!);
  }
  return out;
}
