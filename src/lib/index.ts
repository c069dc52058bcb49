/**
 * `import { startStepd } from 'stepd'`: stepd as a library (docs/library.md). The executor runs
 * in the application's process with tools written as functions; the handle starts workflows,
 * sends signals and waits for results. Everything else in the package is internal.
 * The worker SDK is `stepd/worker` (src/worker/index.ts).
 */
export { startStepd, type Stepd, type StepdOptions } from './startStepd.js';
export type { StartWorkflowOptions, SendSignalOptions } from './clientOptions.js';
export { WaitTimeoutError, type WaitOptions } from './workflowWaits.js';
export type { WorkflowOutcome, WorkflowError } from './workflowOutcome.js';
export type { SentSignal, StartedWorkflow, WorkflowDetails } from '../api/operations.js';
export { OperationError } from '../api/errors.js';
export { StepError } from '../errors.js';
export {
  defineTool,
  type FunctionTool,
  type FunctionToolContext,
  type FunctionToolProgress,
  type FunctionTools,
  type InputSchema,
  type TypedFunctionTools,
} from '../tools/functionTool.js';
export type { StepdFileConfig as StepdConfig } from '../configFile.js';
