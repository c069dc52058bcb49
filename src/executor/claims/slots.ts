import type { ClaimOnCreate, CreatedClaim } from '../core/txWriter.js';

/**
 * One executor's tool slots: `--concurrency` less the slots held by running tool calls and those
 * promised to a claim or transaction in flight, so two of them never count the same free slot.
 * Readied gates, due timers and instant tools take none (they complete at once).
 *
 * Prefetch: a claim may take a few steps more than the free slots (`prefetch`); they wait here, in
 * claim order, and each takes the next slot that frees, without waiting for another claim. Tool
 * calls in flight never exceed the concurrency.
 */
export class Slots {
  private held = 0;
  private reserved = 0;
  /** Claimed steps waiting for a slot (prefetched), oldest first after those that go ahead. */
  private readonly waiters: (() => void)[] = [];
  /** How many waiters at the front went ahead of the others (steps of a fair claim). */
  private ahead = 0;
  /** Whether the last claim left ready steps behind: transactions then claim only half the free slots on creation. */
  backlog = false;

  constructor(
    private readonly concurrency: number,
    /** Outcomes waiting to be recorded: past `maxQueued` the database is behind, and nothing is free. */
    private readonly queuedOutcomes: () => number,
    /** Default: the concurrency (an admission batch of instant steps may queue more; see executor.ts). */
    private readonly maxQueued = concurrency,
    /** Claimed steps that may wait for a slot beyond the concurrency (0: none). */
    private readonly prefetch = 0,
  ) {}

  get free(): number {
    if (this.queuedOutcomes() > this.maxQueued) return 0;
    return Math.max(0, this.concurrency - this.held - this.reserved - this.waiters.length);
  }

  /** How many ready steps a claim may take now: the free slots and the room left in the prefetch. */
  get claimable(): number {
    if (this.queuedOutcomes() > this.maxQueued) return 0;
    return Math.max(0, this.concurrency + this.prefetch - this.held - this.reserved - this.waiters.length);
  }

  /** Outcomes the queue may still take before the database counts as behind (readied signal waits go straight to it). */
  get outcomeRoom(): number {
    return Math.max(0, this.maxQueued - this.queuedOutcomes());
  }

  /** Claimed steps waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Takes a slot for a tool call: at once (undefined) when one is free, else a promise that
   * settles when a slot that frees is handed to it — first come, first served, except that steps
   * going `ahead` (a fair claim's) are served before those already waiting, in their own order.
   */
  holdOrWait(ahead = false): Promise<void> | undefined {
    if (this.held < this.concurrency && this.waiters.length === 0) {
      this.held++;
      return undefined;
    }
    return new Promise((resolve) => {
      if (ahead) this.waiters.splice(this.ahead++, 0, resolve);
      else this.waiters.push(resolve);
    });
  }

  /** Slots a transaction may fill with the steps it creates (half of the free ones while ready steps wait). */
  forCreation(max = Infinity): number {
    const free = this.free;
    return Math.min(max, this.backlog ? Math.floor(free / 2) : free);
  }

  reserve(n: number): void {
    this.reserved += n;
  }

  unreserve(n: number): void {
    this.reserved -= n;
  }

  /** Runs `fn` with `n` slots promised to it, so nothing else counts them until it is done. */
  async reserving<T>(n: number, fn: () => Promise<T>): Promise<T> {
    this.reserved += n;
    try {
      return await fn();
    } finally {
      this.reserved -= n;
    }
  }

  hold(): void {
    this.held++;
  }

  /** A tool call ended: its slot goes to the oldest waiting step, else it is free. */
  release(): void {
    const next = this.waiters.shift();
    if (this.ahead > 0) this.ahead--;
    if (next) next();
    else this.held--;
  }
}

/** A transaction's licence to claim the steps it creates, and how to settle it when it ends. */
export interface CreateClaims {
  handle: ClaimOnCreate;
  /** After the claimed steps were started (they hold their slots now): gives back what is still reserved. */
  settle(): void;
}

/**
 * Lets a transaction claim the steps it creates, up to `maxSlots` and the slots it may fill now
 * (half the free ones while ready steps wait). Each slot is reserved when a step takes it, so a
 * transaction that creates nothing to claim holds none and never keeps the claims waiting.
 */
export function createClaims(
  slots: Slots,
  opts: { executorId: string; maxSlots: number; limited: (tool: string | null, user: string | null) => boolean; instant?: (tool: string) => boolean },
): CreateClaims {
  const allowed = slots.forCreation(opts.maxSlots);
  let taken = 0;
  return {
    handle: {
      executorId: opts.executorId,
      takeSlot: () => {
        if (taken >= allowed || slots.free <= 0) return false;
        taken++;
        slots.reserve(1);
        return true;
      },
      giveSlot: () => {
        taken--;
        slots.unreserve(1);
      },
      acquire: (tool, user) => (opts.limited(tool, user) ? null : () => {}),
      instant: opts.instant ?? (() => false),
    },
    settle: () => {
      slots.unreserve(taken);
      taken = 0;
    },
  };
}

/**
 * Runs a transaction that may claim the steps it creates, with the slots it may fill promised to
 * it until it is done, and starts what it claimed before giving the rest back: two transactions
 * (or a transaction and a claim) never count the same free slot.
 */
export async function runWithCreateClaims<T extends { claimed: CreatedClaim[] }>(
  claims: CreateClaims | undefined,
  fn: (claim: ClaimOnCreate | undefined) => Promise<T>,
  start: (claimed: CreatedClaim[]) => void,
): Promise<T> {
  try {
    const r = await fn(claims?.handle);
    start(r.claimed);
    r.claimed = [];
    return r;
  } finally {
    // The started steps hold their slots now; what is still reserved goes back.
    claims?.settle();
  }
}
