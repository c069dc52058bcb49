/**
 * Writes a client must never get through (DESIGN.md §1 guard, §7 roles), generated with
 * fast-check and aimed at live rows: step rows rewritten, inserted or deleted; admitted
 * workflows' frozen or executor-owned columns changed; status moves off the state machine;
 * running workflows deleted; and, when the database has roles, the `stepd.executor` marker set by
 * hand. Every one must be refused (an error) or match no row; one that changes a row is counted
 * as accepted. Legal writes (cancel, ready a pending step, redrive, edit a `new` workflow) are
 * never generated.
 */
import fc from 'fast-check';

export interface IllegalWrite {
  label: string;
  /** Run in one transaction; the write is the last statement. */
  statements: { text: string; values: unknown[] }[];
}

type Target = { step: string; workflow: string };

const STEP_STATUSES = ['done', 'failed', 'running', 'cancelled'] as const;
const WORKFLOW_STATUSES = ['completed', 'failed', 'new'] as const;
const json = fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)).filter((t) => t !== undefined && !t.includes('\\u0000'));

export function illegalWrite(schema: string, withMarker: boolean): fc.Arbitrary<(t: Target) => IllegalWrite> {
  const steps = `${schema}.workflow_steps`;
  const workflows = `${schema}.workflows`;
  const one = (label: string, text: string, values: (t: Target) => unknown[]) => (t: Target): IllegalWrite => ({ label, statements: [{ text, values: values(t) }] });
  const stepWrites = fc.oneof(
    fc.constantFrom(...STEP_STATUSES).map((st) => one(`step → ${st}`, `UPDATE ${steps} SET status = $2 WHERE id = $1`, (t) => [t.step, st])),
    json.map((j) => one('step result rewritten', `UPDATE ${steps} SET result = $2::jsonb WHERE id = $1 AND status <> 'pending'`, (t) => [t.step, j])),
    fc.constant(one('step taken over', `UPDATE ${steps} SET executor_id = 'intruder', lease_until = now() + interval '1 hour' WHERE id = $1`, (t) => [t.step])),
    fc.constant(one('attempt bumped', `UPDATE ${steps} SET attempt = attempt + 1 WHERE id = $1`, (t) => [t.step])),
    json.map((j) => one('step args and tool rewritten', `UPDATE ${steps} SET args = $2::jsonb, tool = 'http.request' WHERE id = $1`, (t) => [t.step, j])),
    fc.constant(one('ready_at moved', `UPDATE ${steps} SET ready_at = now() - interval '1 day' WHERE id = $1 AND status <> 'pending'`, (t) => [t.step])),
    fc.constant(one('step inserted', `INSERT INTO ${steps} (workflow_id, name, status, ready_at) VALUES ($1, 'intruder', 'ready', now())`, (t) => [t.workflow])),
    fc.constant(one('step deleted', `DELETE FROM ${steps} WHERE id = $1`, (t) => [t.step])),
  );
  const workflowWrites = fc.oneof(
    fc.constantFrom(...WORKFLOW_STATUSES).map((st) =>
      one(`workflow → ${st}`, `UPDATE ${workflows} SET status = $2 WHERE id = $1 AND status NOT IN ('new', $2)`, (t) => [t.workflow, st]),
    ),
    json.map((j) => one('admitted flow rewritten', `UPDATE ${workflows} SET flow = $2::jsonb WHERE id = $1 AND status <> 'new'`, (t) => [t.workflow, j])),
    json.map((j) => one('output written', `UPDATE ${workflows} SET output = $2::jsonb WHERE id = $1 AND status <> 'new'`, (t) => [t.workflow, j])),
    fc.constant(one('created_by changed', `UPDATE ${workflows} SET created_by = 'root' WHERE id = $1 AND status <> 'new'`, (t) => [t.workflow])),
    fc.constant(one('step_count reset', `UPDATE ${workflows} SET step_count = 0 WHERE id = $1 AND status <> 'new'`, (t) => [t.workflow])),
    fc.constant(one('running workflow deleted', `DELETE FROM ${workflows} WHERE id = $1 AND status IN ('new', 'running')`, (t) => [t.workflow])),
    fc.constant(
      one('inserted as completed', `INSERT INTO ${workflows} (name, flow, status, output, completed_at, started_at) VALUES ('intruder', '{}', 'completed', '{}', now(), now())`, () => []),
    ),
    fc.constant(one('steps truncated', `TRUNCATE ${steps} CASCADE`, () => [])),
  );
  const all = withMarker
    ? fc.oneof(
        stepWrites,
        workflowWrites,
        fc.constantFrom(...STEP_STATUSES).map((st) => (t: Target): IllegalWrite => ({
          label: `marker set by hand, step → ${st}`,
          statements: [
            { text: `SELECT set_config('stepd.executor', 'on', true)`, values: [] },
            { text: `UPDATE ${steps} SET status = $2, completed_at = now() WHERE id = $1`, values: [t.step, st] },
          ],
        })),
      )
    : fc.oneof(stepWrites, workflowWrites);
  return all;
}
