/**
 * Cost budgets (docs/ai-steps.md, "Budgets"): before a model call starts, the workflow's cost
 * so far (workflows.usage, sql/0030) is compared with its flow's `budget.cost` and with the
 * operator's cap for the user it runs as (config `llm.budgets`), and so is each workflow above
 * it (a sub-workflow's parents, whose cost includes their ended children). Once a cost has
 * reached its budget, the call does not start: the step fails with `budget_exceeded` (not
 * retryable), so the step's `onError` may route it, else the workflow fails with it.
 *
 * Not to be confused with the CEL cost budget of conditions and templates (docs/caps-and-budgets.md).
 */
import type pg from 'pg';
import type { ClaimedStep } from '../../db/queries.js';
import { getWorkflowCostsUpTheChain } from '../../db/queries.js';
import { StepError } from '../../errors.js';
import { userCostBudget, type LlmConfig } from '../../tools/llm/llmConfig.js';
import { formatCost } from '../../usage/stepUsage.js';

export interface CostBudgetDeps {
  pool: pg.Pool;
  llm?: LlmConfig | undefined;
}

export class BudgetExceededError extends StepError {
  constructor(message: string, details: { workflowId: string; cost: number; budget: number; source: 'flow' | 'user' }) {
    super('budget_exceeded', message, { retryable: false, details });
    this.name = 'BudgetExceededError';
  }
}

/** Throws BudgetExceededError when the step's workflow, or one above it, has spent its budget. */
export async function checkCostBudget(deps: CostBudgetDeps, row: ClaimedStep): Promise<void> {
  let chain: Awaited<ReturnType<typeof getWorkflowCostsUpTheChain>>;
  try {
    chain = await getWorkflowCostsUpTheChain(deps.pool, row.workflow_id);
  } catch (err) {
    // The database did not answer: no call without its check; the attempt fails retryably.
    throw new StepError('budget_unchecked', `step "${row.name}": the workflow's cost could not be read before the model call: ${(err as Error).message}`, { retryable: true, cause: err });
  }
  for (const w of chain) {
    const userCap = userCostBudget(deps.llm, w.createdBy);
    const limits: { budget: number; source: 'flow' | 'user' }[] = [];
    if (w.budget !== null) limits.push({ budget: w.budget, source: 'flow' });
    if (userCap !== undefined) limits.push({ budget: userCap, source: 'user' });
    for (const { budget, source } of limits) {
      if (w.cost < budget) continue;
      const whose = w.id === row.workflow_id ? `workflow ${w.id}` : `workflow ${w.id} (above sub-workflow ${row.workflow_id})`;
      const by = source === 'flow' ? 'its flow\'s budget.cost' : `the config's llm.budgets for user ${JSON.stringify(w.createdBy)}`;
      throw new BudgetExceededError(`${whose} has spent ${formatCost(w.cost)}, reaching ${by} (${formatCost(budget)}): step "${row.name}" does not call the model`, {
        workflowId: w.id,
        cost: w.cost,
        budget,
        source,
      });
    }
  }
}
