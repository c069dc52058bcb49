import { describe, expect, it } from 'vitest';
import { OperationError } from '../../src/api/errors.js';
import { Operations } from '../../src/api/operations.js';
import type { ClientsConfig } from '../../src/configFile.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createClientRole, createSecuredSchema, onCleanup, startConfiguredExecutor, waitFor, waitForWorkflow, type TestSchema } from '../security/helpers.js';

/** Operations on a connection of an untrusted client role, checking whom it may act as. */
async function asClientRole(t: TestSchema, clients: (role: string) => ClientsConfig): Promise<{ ops: Operations; role: string }> {
  const client = await createClientRole(t);
  const pool = createPool({ url: client.url, schema: t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  return { ops: new Operations({ pool, db, schema: t.schema, actAs: { clients: clients(client.role) } }), role: client.role };
}

async function refusal(p: Promise<unknown>): Promise<OperationError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(OperationError);
    return err as OperationError;
  }
  throw new Error('expected an OperationError');
}

const GUARDED = { start: 'review', steps: { review: { approval: { approvers: ['alice', 'bob'] }, next: 'ship' }, ship: { tool: 'core.echo', args: {} } } };

describe('the database role the operations connect as', () => {
  it('starts and approves only as users its clients.actAs patterns match, saying so before writing', async () => {
    const t = await createSecuredSchema();
    const { ops, role } = await asClientRole(t, (r) => ({ [r]: { actAs: ['alice'] } }));
    await startConfiguredExecutor(t, { clients: { [role]: { actAs: ['alice'] } } });

    const refused = await refusal(ops.startWorkflow('bob', { name: 'release', flow: GUARDED }));
    expect(refused.code).toBe('permission_denied');
    expect(refused.message).toBe(`database role "${role}" may not start workflows as user "bob": its actAs patterns (alice) do not match; nothing was started`);
    expect(await t.q('SELECT id FROM stepd.workflows')).toEqual([]);

    const { workflowId } = await ops.startWorkflow('alice', { name: 'release', flow: GUARDED });
    const gate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId })).waiting[0], 'the gate to wait');
    const notAs = await refusal(ops.approveStep('bob', { stepId: gate.stepId }));
    expect(notAs.message).toBe(`database role "${role}" may not approve as user "bob": its actAs patterns (alice) do not match; nothing was readied`);
    await ops.approveStep('alice', { stepId: gate.stepId });
    expect(await waitForWorkflow(t, workflowId)).toMatchObject({ status: 'completed', created_by: 'alice' });
  });
});
