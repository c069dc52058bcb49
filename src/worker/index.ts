/**
 * `import { createWorker } from 'stepd/worker'`: the TypeScript worker SDK (docs/library.md,
 * docs/workers.md). A worker serves worker tools (the config's `workers` section) from any host,
 * through the SQL worker contract; it shares nothing with the executor but the database.
 */
export { createWorker, type Worker, type WorkerOptions } from './createWorker.js';
export type { TaskEnd } from './taskRun.js';
export type { WorkerTask } from '../db/queries/workerContract.js';
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
