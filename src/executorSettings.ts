/**
 * What the executor takes from the configuration file beyond its tools: the sections that shape
 * its decisions (rates, clients, caps, cost budgets, retention). One place, so that the daemon
 * (`stepd start`) and the library (`startStepd`) run the same executor for the same config.
 */
import type { StepdFileConfig } from './configFile.js';
import type { ExecutorDeps } from './executor/executorDeps.js';
import { ratePolicy } from './tools/rates.js';

export type ConfigExecutorDeps = Pick<ExecutorDeps, 'rates' | 'clients' | 'caps' | 'llm' | 'retention'>;

export function executorDepsFromConfig(config: StepdFileConfig): ConfigExecutorDeps {
  return {
    rates: ratePolicy(config.limits?.rates),
    ...(config.clients ? { clients: config.clients } : {}),
    ...(config.caps ? { caps: config.caps } : {}),
    ...(config.llm ? { llm: config.llm } : {}),
    ...(config.retention ? { retention: config.retention } : {}),
  };
}
