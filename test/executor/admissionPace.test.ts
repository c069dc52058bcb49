import { describe, expect, it } from 'vitest';
import { ADMIT_WAIT_MS, admissionPace } from '../../src/executor/admission/admissionPace.js';

describe('how much one admission takes', () => {
  it('takes a whole batch while no ready step waits, claiming first steps up to the free slots', () => {
    expect(admissionPace({ free: 10, backlog: false, admitBatch: 500, blockedForMs: 0 })).toEqual({ admit: true, limit: 500, claimSlots: 10 });
  });

  it('takes no more than it can start while ready steps wait', () => {
    expect(admissionPace({ free: 10, backlog: true, admitBatch: 500, blockedForMs: 0 })).toEqual({ admit: true, limit: 5, claimSlots: 5 });
  });

  it('waits for a slot a little with every slot busy, then admits a batch without claiming', () => {
    expect(admissionPace({ free: 0, backlog: false, admitBatch: 500, blockedForMs: 30 })).toEqual({ admit: false, retryInMs: ADMIT_WAIT_MS - 30 });
    expect(admissionPace({ free: 0, backlog: true, admitBatch: 500, blockedForMs: ADMIT_WAIT_MS })).toEqual({ admit: true, limit: 500, claimSlots: 0 });
  });
});
