/** The shapes the workflow operations take and return (src/api/operations.ts). */
import type { StatusView } from '../cli/statusView.js';
import type { WorkflowStatus } from '../db/tables.js';
import type { FlowIssue } from '../flow/spec.js';

export interface StartWorkflowInput {
  /** The workflow's name (with no `flow`: the registered flow of that name). */
  name: string;
  /** The flow JSON (either form), or its text. */
  flow?: unknown;
  /** With no `flow`: this version of the registered flow (default: the latest). */
  version?: number;
  input?: unknown;
  /** Idempotency key: an existing workflow with this key is returned instead of starting another. */
  key?: string;
}

export interface StartedWorkflow {
  workflowId: string;
  name: string;
  status: WorkflowStatus;
  /** False when a workflow with the key existed already (nothing was started). */
  created: boolean;
}

export interface WaitingGate {
  stepId: string;
  name: string;
  /** For a gate inside a sub-workflow (at any depth): that workflow's id. */
  workflowId?: string;
  /** What the gate asks: its approval.message as rendered when it started waiting, else the step's description. */
  message?: string;
  /** Who may approve or reject it. */
  approvers?: string[];
  /** The last readying the daemon refused (approvers, approval.schema): the gate waits again. */
  refused?: unknown;
  since: string;
  expiresAt: string | null;
}

export interface WorkflowDetails {
  workflow: StatusView['workflow'];
  steps: StatusView['steps'];
  waiting: WaitingGate[];
}

export interface ReadiedStep {
  stepId: string;
  workflowId: string;
  name: string;
  status: string;
  result: unknown;
  readiedBy: string | null;
  readiedAt: string | null;
}

export interface ValidationResult {
  valid: boolean;
  /** Number of steps, when valid. */
  steps?: number;
  issues: FlowIssue[];
}
