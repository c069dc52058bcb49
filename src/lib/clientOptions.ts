/** What the client helpers take (kept apart from the client, so the public types need no driver types). */

export interface StartWorkflowOptions<Input extends Record<string, unknown> = Record<string, unknown>> {
  /** The workflow's name; with no `flow`, the registered flow of that name (`stepd flow put`). */
  name: string;
  /** The flow JSON (an object or its text); omitted: the registered flow `name`. */
  flow?: unknown;
  /** With no `flow`: this version of the registered flow (default: the latest). */
  version?: number;
  input?: Input;
  /** Idempotency key: when a workflow with this key exists, it is returned and nothing starts. */
  key?: string;
  /** Who the steps run as (created_by; permissions apply). Default: the `user` given to startStepd. */
  user?: string;
}

export interface SendSignalOptions<Payload extends Record<string, unknown> = Record<string, unknown>> {
  /** The signal's name, like "payment.received". */
  name: string;
  /** Its business key, like "order-42". */
  key?: string | null;
  payload?: Payload;
  /** Who sends it (checked like the CLI's; default: the `user` given to startStepd). */
  user?: string;
}
