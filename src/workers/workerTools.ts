/**
 * The tools of a worker prefix (config `workers`): any `prefix.name` is a tool, served by worker
 * processes through the SQL worker contract, never called in this process. Its steps take no
 * tool slot: the executor only hands them to the workers and records what they report
 * (src/executor/steps/workerTaskStep.ts).
 */
import { StepError } from '../errors.js';
import type { ToolInfo, ToolProvider } from '../tools/tool.js';
import type { WorkerPrefix } from './workersConfig.js';

export class WorkerToolProvider implements ToolProvider {
  readonly prefix: string;
  readonly timeoutMs: number | undefined;

  constructor(p: WorkerPrefix) {
    this.prefix = p.prefix;
    this.timeoutMs = p.timeoutMs;
  }

  /** Never reached from a step (runStep hands worker tools to the workers). */
  async call(tool: string): Promise<unknown> {
    throw new StepError('worker_tool', `tool "${this.prefix}.${tool}" is served by workers (config "workers"); it is not called by the executor`, { retryable: false });
  }

  /** Handing a step to the workers, and recording what they report, is instant. */
  isInstant(): boolean {
    return true;
  }

  /** Served by workers: the timeout of its steps when the flow sets none (undefined: the step's own). */
  servedByWorkers(): { timeoutMs?: number } {
    return this.timeoutMs === undefined ? {} : { timeoutMs: this.timeoutMs };
  }

  /** Workers register no tool list: any name under the prefix is theirs. */
  async list(): Promise<ToolInfo[]> {
    return [];
  }
}
