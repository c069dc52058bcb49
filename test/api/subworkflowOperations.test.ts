import { describe, expect, it } from 'vitest';
import { Operations } from '../../src/api/operations.js';
import { OperationError } from '../../src/api/errors.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createTestSchema, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

function operations(t: TestSchema): Operations {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  return new Operations({ pool, db, schema: t.schema });
}

describe('workflow operations with sub-workflows', () => {
  it("lists a child's waiting gate with the parent's (message and approvers from the child's flow) and refuses approving the waiting step itself", async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('review', $1)`, [
      JSON.stringify({ start: 'ok', steps: { ok: { approval: { message: 'Ship it?', approvers: ['alice'] }, next: 'say' }, say: { tool: 'core.echo', args: { shipped: true } } } }),
    ]);
    await startExecutor(t);
    const ops = operations(t);
    const started = await ops.startWorkflow('alice', { name: 'outer', flow: { start: 'sub', steps: { sub: { workflow: { name: 'review' } } } } });
    const gate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId: started.workflowId })).waiting[0], "the child's gate");
    const details = await ops.getWorkflow('alice', { workflowId: started.workflowId });
    const sub = details.steps[0]!;
    expect(gate).toMatchObject({ name: 'ok', workflowId: sub.childId, message: 'Ship it?', approvers: ['alice'] });
    expect(sub).toMatchObject({ kind: 'workflow', status: 'pending', child: { workflow: { id: sub.childId } } });

    const refused = await ops.approveStep('alice', { stepId: sub.id }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OperationError);
    expect((refused as OperationError).message).toContain(`waits for sub-workflow ${sub.childId}`);

    await ops.approveStep('alice', { stepId: gate.stepId });
    expect(await waitForWorkflow(t, started.workflowId)).toMatchObject({ status: 'completed', output: { shipped: true } });
  });
});
