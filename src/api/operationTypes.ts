/** The shapes the workflow operations take and return (src/api/operations.ts). */
import type { StatusView, WaitingSignal } from './views/statusView.js';
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
  /** ...and its name. */
  workflowName?: string;
  /** What the gate asks: its approval.message as rendered when it started waiting, else the step's description. */
  message?: string;
  /** Who may approve or reject it. */
  approvers?: string[];
  /** Whether the caller is among them (false: approving or rejecting it would be refused); set by getWorkflow. */
  mayApprove?: boolean;
  /** The JSON Schema the approval data must match (approval.schema). */
  schema?: unknown;
  /** The last readying the daemon refused (approvers, approval.schema): the gate waits again. */
  refused?: unknown;
  since: string;
  expiresAt: string | null;
}

export interface WorkflowDetails {
  workflow: StatusView['workflow'];
  steps: StatusView['steps'];
  /** Gates waiting for someone to approve or reject them. */
  waiting: WaitingGate[];
  /** Steps waiting for a signal: no gates (nobody approves them); send_signal moves them on. */
  signals: WaitingSignal[];
}

export type { WaitingSignal };

export interface SendSignalInput {
  /** The signal's name, like "payment.received". */
  name: string;
  /** Its business key, like "order-42" (default: none; a wait without a key takes it, one with a key does not). */
  key?: string | null;
  /** A JSON object (default {}). */
  payload?: unknown;
}

export interface SentSignal {
  signalId: string;
  name: string;
  key: string | null;
  payload: unknown;
  createdAt: string;
  /** The database role that wrote it (stamped by the database). */
  createdRole: string;
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
  /** What could not be checked (an MCP server that did not answer); never makes the flow invalid. */
  warnings?: FlowIssue[];
}
