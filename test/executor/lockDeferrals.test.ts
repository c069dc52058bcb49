import { describe, expect, it } from 'vitest';
import { workflowHeldAtAdmission } from '../../src/executor/admission/admissionLocks.js';
import { RowHeldElsewhere } from '../../src/executor/core/rowHeldElsewhere.js';
import { LockDeferrals } from '../../src/executor/core/lockDeferrals.js';

describe('LockDeferrals', () => {
  it('skips a deferred workflow until its backoff ends, doubling it up to 2 s', () => {
    let now = 1_000;
    const d = new LockDeferrals(() => now);
    expect(d.skipped()).toEqual([]);
    expect(d.nextInMs()).toBeUndefined();
    expect(d.defer('7')).toBe(100);
    expect(d.skipped()).toEqual(['7']);
    expect(d.nextInMs()).toBe(100);
    now += 100;
    expect(d.skipped()).toEqual([]);
    expect(d.nextInMs()).toBeUndefined();
    const delays = [1, 2, 3, 4, 5, 6].map(() => d.defer('7'));
    expect(delays).toEqual([200, 400, 800, 1_600, 2_000, 2_000]);
  });

  it('forgets an entry long past its retry, so its backoff starts afresh', () => {
    let now = 0;
    const d = new LockDeferrals(() => now);
    d.defer('1');
    d.defer('1');
    now += 61_000;
    expect(d.skipped()).toEqual([]);
    expect(d.defer('1')).toBe(100);
  });

  it('names the workflow that met the lock, retryable', () => {
    const lockTimeout = Object.assign(new Error('lock timeout'), { code: '55P03' });
    const err = new RowHeldElsewhere({ stage: 'admit', workflowId: '42' }, 500, lockTimeout);
    expect(err).toMatchObject({ code: 'admission_lock_held', retryable: true, workflowId: '42', lockWaitMs: 500, cause: lockTimeout });
    expect(workflowHeldAtAdmission(err)).toBe('42');
  });

  it("keeps an outcome batch's held row apart from admission's: its own code, and no workflow to defer at admission", () => {
    const lockTimeout = Object.assign(new Error('lock timeout'), { code: '55P03' });
    const advance = new RowHeldElsewhere({ stage: 'advance', workflowId: '7' }, 200, lockTimeout);
    expect(advance).toMatchObject({ code: 'row_held_elsewhere', retryable: true, workflowId: '7', where: { stage: 'advance', workflowId: '7' } });
    expect(workflowHeldAtAdmission(advance)).toBeUndefined();
    expect(new RowHeldElsewhere({ stage: 'steps' }, 200, lockTimeout).workflowId).toBeUndefined();
    expect(workflowHeldAtAdmission(lockTimeout)).toBeUndefined();
  });
});
