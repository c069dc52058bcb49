/**
 * The send_signal operation on the daemon's HTTP side, whose database role every user shares: a
 * signal carries the role, not the user (and triggers start workflows as that role), so only an
 * admin (config api.admins) may send one there; on a caller's own role anyone may.
 */
import { describe, expect, it } from 'vitest';
import { OperationError } from '../../src/api/errors.js';
import { Operations } from '../../src/api/operations.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createTestSchema, onCleanup, type TestSchema } from '../helpers/db.js';

function operations(t: TestSchema, opts: { sharedRole?: boolean; admins?: string[] }): Operations {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  return new Operations({ pool, db, schema: t.schema, ...opts });
}

describe('sendSignal', () => {
  it('on the daemon\'s shared role: an admin sends, any other user is refused and nothing is inserted', async () => {
    const t = await createTestSchema();
    const shared = operations(t, { sharedRole: true, admins: ['ops'] });
    const refused = await shared.sendSignal('alice', { name: 'payment.received', key: 'order-42' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OperationError);
    expect(refused).toMatchObject({ code: 'permission_denied', message: expect.stringContaining('user "alice" may not send signals here') });
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.signals`)).toEqual([{ n: 0 }]);

    const sent = await shared.sendSignal('ops', { name: 'payment.received', key: 'order-42', payload: { amount: 1200 } });
    expect(sent).toMatchObject({ name: 'payment.received', key: 'order-42', payload: { amount: 1200 }, createdRole: 'postgres' });

    // On the caller's own role (stepd signal, stepd mcp): anyone.
    const own = await operations(t, {}).sendSignal('alice', { name: 'order.cancelled' });
    expect(own).toMatchObject({ name: 'order.cancelled', key: null, payload: {} });
    expect(await t.q(`SELECT name FROM stepd.signals ORDER BY id`)).toEqual([{ name: 'payment.received' }, { name: 'order.cancelled' }]);
  });
});
