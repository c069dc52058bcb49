import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForWorkflow } from '../helpers/db.js';

const example = async (name: string) => JSON.parse(await readFile(new URL(`../../examples/${name}.json`, import.meta.url), 'utf8')) as unknown;

describe('examples/orders.json with examples/ship.json registered', () => {
  it('ships each order as a child, each waiting for its own confirmation, and reports the labels in order', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('ship', $1)`, [JSON.stringify(await example('ship'))]);
    await startExecutor(t);
    const id = await insertWorkflow(t, await example('orders'), { orders: [{ id: 'A1' }, { id: 'B2' }, { id: 'C3' }] }, { name: 'orders' });

    const gates = await waitFor(async () => {
      const rows = await t.q<{ id: string }>(
        `SELECT s.id FROM stepd.workflow_steps s JOIN stepd.workflows w ON w.id = s.workflow_id
          WHERE w.parent_id = $1 AND s.name = 'confirm' AND s.status = 'pending' ORDER BY w.id DESC`,
        [id],
      );
      return rows.length === 3 ? rows : undefined;
    }, 'three confirmations waiting');
    for (const g of gates) await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [g.id]);

    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({
      labels: [
        { order: 'A1', label: 'LBL-A1' },
        { order: 'B2', label: 'LBL-B2' },
        { order: 'C3', label: 'LBL-C3' },
      ],
    });
  });
});
