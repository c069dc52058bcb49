/**
 * Whether a fork (sql/0031) may run from a step of its flow: the step must exist and must not be
 * the join of a fan-out (a join runs on its fan-out's results, which only the fan-out gives it:
 * fork from the fan-out instead). Pure.
 */
import type { CompiledFlow } from './compiled.js';

export function forkStartProblem(flow: CompiledFlow, name: string): string | undefined {
  if (!flow.steps.has(name)) return `step ${JSON.stringify(name)} is not in the flow`;
  for (const [fanout, step] of flow.steps) {
    const t = step.transition as { kind: string; join?: string };
    if ((t.kind === 'parallel' || t.kind === 'forEach') && t.join === name) {
      return `step ${JSON.stringify(name)} is the join of fan-out ${JSON.stringify(fanout)}, which gives it its results: fork from ${JSON.stringify(fanout)} instead`;
    }
  }
  return undefined;
}
