/**
 * Adding and removing signal triggers, as `stepd trigger` does it: the `triggers` row is written
 * on the caller's connection, so the database records the caller's role (which answers for what
 * the trigger starts) and applies the owner rules (sql/0026). Refusals the CLI can explain before
 * the database does are TriggerError with a code and a message that says how to fix it: a bad
 * name, an unknown flow, a template that is not JSON; the database's own refusals (another role's
 * trigger, a template naming something a signal does not have) keep its message.
 */
import type pg from 'pg';
import { loadFlowVersion } from '../db/queries/flows.js';
import { deleteOwnTrigger, upsertTrigger, type NewTrigger, type TriggerRow } from '../db/queries/signalTriggers.js';

export type TriggerErrorCode = 'invalid_trigger' | 'unknown_flow' | 'not_found';

export class TriggerError extends Error {
  readonly retryable = false;
  constructor(
    readonly code: TriggerErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'TriggerError';
  }
}

/** The rule of sql/0026 (as for schedule names): the name is part of each workflow's key. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

export function checkTriggerName(name: string): void {
  if (!NAME.test(name)) {
    throw new TriggerError('invalid_trigger', `trigger name ${JSON.stringify(name)} is not valid: use letters, digits, '_', '.' and '-' (starting with a letter or digit), at most 100 characters`, { name });
  }
}

/** The input template given as JSON text: a JSON object, or a string such as "{{signal.payload}}". */
export function parseTemplateArg(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new TriggerError('invalid_trigger', `--input is not valid JSON: ${(err as Error).message}\n  give a JSON object such as '{"order": "{{signal.key}}", "amount": "{{signal.payload.amount}}"}'`, { input: text.slice(0, 200) });
  }
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isObject && typeof value !== 'string') {
    throw new TriggerError('invalid_trigger', `--input must be a JSON object (or a string that is one template, such as '"{{signal.payload}}"'); got ${text.slice(0, 200)}`, { input: text.slice(0, 200) });
  }
  return value;
}

/**
 * Adds the trigger (or replaces the one of that name) after checking the name and that the flow
 * is registered; the database checks the template and the owner again, for every writer.
 */
export async function addTrigger(client: pg.ClientBase, g: NewTrigger): Promise<TriggerRow & { created: boolean }> {
  checkTriggerName(g.name);
  if (!(await loadFlowVersion(client, g.flow, null))) {
    throw new TriggerError('unknown_flow', `flow ${JSON.stringify(g.flow)} is not registered; register it first (stepd flow put FILE --name ${g.flow}) — see stepd flow list`, { flow: g.flow });
  }
  return upsertTrigger(client, g);
}

/** Removes the trigger; workflows it started keep running. */
export async function removeTrigger(client: pg.ClientBase, name: string): Promise<TriggerRow> {
  const row = await deleteOwnTrigger(client, name);
  if (!row) throw new TriggerError('not_found', `there is no trigger named ${JSON.stringify(name)} (stepd trigger list)`, { name });
  return row;
}
