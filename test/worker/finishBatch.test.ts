/**
 * FinishBatch (src/worker/finishBatch.ts), pure: results ready while a report is being written go
 * together in one call; a call refused as a whole is sent again one by one, each task getting its
 * own answer; a connection failure rejects that call's tasks (each TaskRun retries); a database
 * without finish_tasks is used one by one from then on; every promise settles exactly once.
 */
import { describe, expect, it } from 'vitest';
import { FinishBatch, type FinishItem } from '../../src/worker/finishBatch.js';

const item = (id: number): FinishItem => ({ task: { stepId: String(id), token: `t${id}` }, result: { id } });
const dbError = (code: string) => Object.assign(new Error(`db ${code}`), { code });

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('FinishBatch', () => {
  it('sends the first result at once, and the ones ready meanwhile together in one call', async () => {
    const calls: string[][] = [];
    const first = deferred();
    const batch = new FinishBatch({
      one: async (i) => {
        calls.push([i.task.stepId]);
        await first.promise;
      },
      many: async (items) => void calls.push(items.map((i) => i.task.stepId)),
    });
    const p1 = batch.finish(item(1));
    const rest = [2, 3, 4].map((i) => batch.finish(item(i)));
    expect(calls).toEqual([['1']]);
    first.resolve();
    await Promise.all([p1, ...rest]);
    expect(calls).toEqual([['1'], ['2', '3', '4']]);
  });

  it('a call refused as a whole is sent one by one: each task gets its own answer', async () => {
    const one: string[] = [];
    const hold = deferred();
    const batch = new FinishBatch({
      one: async (i) => {
        one.push(i.task.stepId);
        if (i.task.stepId === '1') return hold.promise;
        if (i.task.stepId === '3') throw dbError('55000');
      },
      many: async () => {
        throw dbError('55000');
      },
    });
    const p1 = batch.finish(item(1));
    const settled = Promise.allSettled([2, 3, 4].map((i) => batch.finish(item(i))));
    hold.resolve();
    await p1;
    const results = await settled;
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.code).toBe('55000');
    expect(one).toEqual(['1', '2', '3', '4']);
  });

  it('a lost connection rejects the whole call with that error (not sent again here)', async () => {
    let many = 0;
    const hold = deferred();
    const batch = new FinishBatch({
      one: () => hold.promise,
      many: async () => {
        many++;
        throw Object.assign(new Error('Connection terminated unexpectedly'), {});
      },
    });
    const p1 = batch.finish(item(1));
    const settled = Promise.allSettled([2, 3].map((i) => batch.finish(item(i))));
    hold.resolve();
    await p1;
    const results = await settled;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(many).toBe(1);
  });

  it('a database without finish_tasks (42883): one by one from then on', async () => {
    let many = 0;
    const one: string[] = [];
    let hold = deferred();
    const batch = new FinishBatch({
      one: async (i) => {
        one.push(i.task.stepId);
        if (i.task.stepId === '1' || i.task.stepId === '4') await hold.promise;
      },
      many: async () => {
        many++;
        throw dbError('42883');
      },
    });
    const p1 = batch.finish(item(1));
    const p23 = [2, 3].map((i) => batch.finish(item(i)));
    hold.resolve();
    await Promise.all([p1, ...p23]);
    hold = deferred();
    const p4 = batch.finish(item(4));
    const p56 = [5, 6].map((i) => batch.finish(item(i)));
    hold.resolve();
    await Promise.all([p4, ...p56]);
    expect(many).toBe(1);
    expect(one).toEqual(['1', '2', '3', '4', '5', '6']);
  });
});
