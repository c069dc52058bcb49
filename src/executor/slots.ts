import type { ClaimOnCreate } from './txWriter.js';

/**
 * One executor's tool slots: `--concurrency` less the slots held by running tool calls and those
 * promised to a claim or transaction in flight, so two of them never count the same free slot.
 * Readied gates and due timers take none (they complete at once).
 */
export class Slots {
  private held = 0;
  private reserved = 0;
  /** Whether the last claim left ready steps behind: transactions then claim only half the free slots on creation. */
  backlog = false;

  constructor(
    private readonly concurrency: number,
    /** Outcomes waiting to be recorded: past `maxQueued` the database is behind, and nothing is free. */
    private readonly queuedOutcomes: () => number,
    /** Default: the concurrency (an admission batch of instant steps may queue more; see executor.ts). */
    private readonly maxQueued = concurrency,
  ) {}

  get free(): number {
    if (this.queuedOutcomes() > this.maxQueued) return 0;
    return Math.max(0, this.concurrency - this.held - this.reserved);
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

  release(): void {
    this.held--;
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
