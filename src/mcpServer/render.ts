/**
 * The text rendering of each MCP tool's result, for clients that show text rather than
 * `structuredContent`: one line saying what happened, then the result as JSON.
 */
import type { ReadiedStep, SentSignal, StartedWorkflow, ValidationResult, WorkflowDetails } from '../api/operations.js';
import { describeSignalWait } from '../api/views/signalWait.js';
import type { ScheduleListing } from '../api/views/scheduleView.js';
import type { WorkflowSummaryView } from '../api/views/workflowSummary.js';

export function render(tool: string, result: object): string {
  return `${headline(tool, result)}\n${JSON.stringify(result, null, 2)}`;
}

function headline(tool: string, result: object): string {
  switch (tool) {
    case 'start_workflow': {
      const r = result as StartedWorkflow;
      return r.created ? `started workflow ${r.workflowId} (${r.name})` : `workflow ${r.workflowId} (${r.name}) already exists with this key (${r.status}); nothing was started`;
    }
    case 'get_workflow': {
      const r = result as WorkflowDetails;
      const gates = r.waiting.map((w) => `step ${w.stepId} (${w.name})${w.message ? `: ${w.message}` : ''}`);
      const signals = r.signals.map((w) => `step ${w.stepId} (${w.name}) waits for ${describeSignalWait(w)}`);
      return `workflow ${r.workflow.id} (${r.workflow.name}) is ${r.workflow.status}, ${r.steps.length} step row(s)${gates.length ? `; waiting for approval: ${gates.join('; ')}` : ''}${signals.length ? `; waiting for signals: ${signals.join('; ')}` : ''}`;
    }
    case 'list_workflows': {
      const list = (result as { workflows: WorkflowSummaryView[] }).workflows;
      return list.length === 0 ? 'no workflows' : list.map((w) => `${w.id} ${w.status} ${w.name}${w.waiting ? ` (${w.waiting} gate(s) waiting)` : ''}`).join('\n');
    }
    case 'approve_step':
    case 'reject_step': {
      const r = result as ReadiedStep;
      return `${tool === 'approve_step' ? 'approved' : 'rejected'} step ${r.stepId} (${r.name}) of workflow ${r.workflowId}${r.readiedBy ? ` as ${r.readiedBy}` : ''}`;
    }
    case 'fork_workflow': {
      const r = result as { workflowId: string; forkedFrom: string; fromStep: string | null };
      return `forked workflow ${r.forkedFrom} as workflow ${r.workflowId}, running from ${r.fromStep ?? 'its start'}`;
    }
    case 'cancel_workflows':
    case 'retry_workflows': {
      const r = result as { dryRun: boolean; workflows: unknown[] };
      const verb = tool === 'cancel_workflows' ? 'cancelled' : 'retried';
      return r.dryRun ? `${r.workflows.length} workflow(s) would be ${verb}; nothing was changed` : `${r.workflows.length} workflow(s) ${verb}`;
    }
    case 'cancel_workflow': {
      const r = result as { workflowId: string; name: string };
      return `cancelled workflow ${r.workflowId} (${r.name})`;
    }
    case 'retry_workflow': {
      const r = result as { workflowId: string; name: string };
      return `redrive of workflow ${r.workflowId} (${r.name}) requested; the daemon gives its failed steps new attempts (follow it with get_workflow)`;
    }
    case 'send_signal': {
      const r = result as SentSignal;
      return `sent signal ${r.signalId} (${r.name}${r.key !== null ? `, key ${r.key}` : ''}) as role ${r.createdRole}`;
    }
    case 'validate_flow': {
      const r = result as ValidationResult;
      const warned = (r.warnings ?? []).map((w) => `\n  warning: ${w.path || '(flow)'}: ${w.message}`).join('');
      return (r.valid ? `valid (${r.steps} steps)` : `${r.issues.length} issue(s):\n${r.issues.map((i) => `  ${i.path || '(flow)'}: ${i.message}`).join('\n')}`) + warned;
    }
    case 'list_flows': {
      const r = result as { flows: { name: string; version: number }[] };
      return r.flows.length === 0 ? 'no registered flows (register one with: stepd flow put FILE --name NAME)' : r.flows.map((f) => `${f.name} v${f.version}`).join('\n');
    }
    case 'list_schedules': {
      const r = result as { schedules: ScheduleListing[] };
      return r.schedules.length === 0
        ? 'no schedules (add one with: stepd schedule add NAME --cron EXPR --flow FLOW)'
        : r.schedules.map((v) => `${v.name} "${v.cron}" (${v.tz}) flow ${v.flow}, next ${v.paused ? 'paused' : (v.next ?? '-')}`).join('\n');
    }
    case 'list_tools': {
      const r = result as { tools: { name: string }[] };
      return `${r.tools.length} tool(s) you may call: ${r.tools.map((t) => t.name).join(', ')}`;
    }
    default:
      return tool;
  }
}
