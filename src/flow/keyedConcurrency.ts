/**
 * A keyed concurrency limit as compiled (capacity.ts reads it from the flow JSON): at most `limit`
 * steps (or workflows) hold one value of the key template at once.
 */
export interface KeyedConcurrency {
  /** The key template, resolved with the step's scope (the flow's: with `input`). */
  key: string;
  limit: number;
}
