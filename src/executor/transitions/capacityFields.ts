/**
 * What a new tool step row carries for keys and rates (sql/0028): its own key value and limit,
 * the token buckets it takes from, and whether it is gated (its flow has a key, or it has a key
 * or a rate): gated steps are never claimed on creation nor by the hot claims, only by the
 * capacity claim (claimGated.ts), which asks the database whether they may start.
 */
import type { StepCapacity } from '../../db/queries.js';
import { renderKey, roleScopedKey } from '../../flow/capacity.js';
import type { CompiledFlow, CompiledStep } from '../../flow/compiled.js';
import type { TemplateScope } from '../../flow/templates.js';
import type { RatePolicy } from '../../tools/rates.js';

/**
 * The capacity fields of a tool step created with `scope`, or {} when nothing gates it. Key
 * values are counted per role (`role`: the workflow's created_role; roleScopedKey).
 */
export function stepCapacityFields(
  flow: CompiledFlow,
  step: CompiledStep,
  scope: TemplateScope,
  user: string | null,
  rates: RatePolicy | undefined,
  role: string | null | undefined = null,
): { capacity?: StepCapacity } {
  const stepKey = step.concurrency ? roleScopedKey(role, renderKey(step.concurrency.key, scope)) : undefined;
  const flowKey = flow.concurrency ? roleScopedKey(role, renderKey(flow.concurrency.key, scope)) : undefined;
  const rateKeys = rates?.any && step.tool !== null ? rates.bucketsFor(step.tool, user, stepKey ?? flowKey) : [];
  if (stepKey === undefined && rateKeys.length === 0 && !flow.concurrency) return {};
  return {
    capacity: {
      ...(stepKey !== undefined ? { concurrencyKey: stepKey, concurrencyLimit: step.concurrency!.limit } : {}),
      ...(rateKeys.length > 0 ? { rateKeys } : {}),
    },
  };
}
