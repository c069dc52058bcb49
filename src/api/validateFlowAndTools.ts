/**
 * `validate_flow` (MCP): the flow as the executor checks it, then its tools as `stepd validate`
 * checks them when this process knows them (src/tools/flowToolCheck.ts). No database needed.
 */
import type { Caps } from '../flow/caps.js';
import { compileFlow } from '../flow/validate.js';
import { checkFlowTools, type ToolLookupFactory } from '../tools/flowToolCheck.js';
import type { ValidationResult } from './operationTypes.js';
import { parseFlowArg } from './startCheck.js';

export async function validateFlowAndTools(flowArg: unknown, options: { caps?: Readonly<Caps> }, toolLookup: ToolLookupFactory | undefined): Promise<ValidationResult> {
  let flow: unknown;
  try {
    flow = parseFlowArg(flowArg);
  } catch (err) {
    return { valid: false, issues: [{ path: '', message: (err as Error).message }] };
  }
  const compiled = compileFlow(flow, options);
  if (!compiled.ok) return { valid: false, issues: compiled.issues };
  if (!toolLookup) return { valid: true, steps: compiled.flow.steps.size, issues: [] };
  const tools = await checkFlowTools(compiled.flow, toolLookup());
  return {
    valid: tools.issues.length === 0,
    ...(tools.issues.length === 0 ? { steps: compiled.flow.steps.size } : {}),
    issues: tools.issues,
    ...(tools.warnings.length > 0 ? { warnings: tools.warnings } : {}),
  };
}
