/**
 * `stepd validate`'s check of `llm.chat` steps: a literal `model` ("provider/model") must name a
 * provider of the config's `llm.providers` (a templated model is left to run time). Without a
 * config file, the providers are unknown: a warning, not an issue.
 */
import type { CompiledFlow } from '../../flow/compiled.js';
import type { FlowIssue } from '../../flow/spec.js';
import { splitModel, type LlmConfig } from './llmConfig.js';

export function checkModelProviders(flow: CompiledFlow, llm: LlmConfig | undefined, configRead: boolean): { issues: FlowIssue[]; warnings: FlowIssue[] } {
  const issues: FlowIssue[] = [];
  const warnings: FlowIssue[] = [];
  const providers = Object.keys(llm?.providers ?? {}).sort();
  for (const step of flow.steps.values()) {
    if (step.tool !== 'llm.chat') continue;
    const model = (step.spec.args as { model?: unknown } | undefined)?.model;
    if (typeof model !== 'string' || model.includes('{{')) continue;
    const parts = splitModel(model);
    if (!parts) continue; // the argument check names the shape
    if (providers.includes(parts.provider)) continue;
    const path = `steps.${step.name}.args.model`;
    if (!configRead) {
      warnings.push({ path, message: `provider "${parts.provider}" not checked: no configuration was read (use --config PATH)` });
      continue;
    }
    issues.push({ path, message: `no provider "${parts.provider}" in the config's llm.providers (${providers.length ? `it has ${providers.join(', ')}` : 'it has none'})` });
  }
  return { issues, warnings };
}
