import { describe, expect, it } from 'vitest';
import { describeEvent } from '../../src/cli/follow.js';
import type { StepdEvent } from '../../src/events.js';

const retrying = (extra: Partial<StepdEvent> = {}): StepdEvent => ({
  type: 'step.retrying',
  schema: 'stepd',
  workflowId: '7',
  step: 'work',
  attempt: 2,
  retryInMs: 1500,
  at: '2026-01-01T00:00:00.000Z',
  ...extra,
});

describe('the retry line', () => {
  it('names the fan-out item of a step inside a forEach, as work[4] will retry', () => {
    expect(describeEvent(retrying({ itemIndex: 4 }))).toMatch(/^work\[4\] will retry: attempt 2 in /);
  });

  it('names the step alone outside a fan-out', () => {
    expect(describeEvent(retrying())).toMatch(/^work will retry: attempt 2 in /);
  });
});
