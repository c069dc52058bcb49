/**
 * Every runtime statement of the executor, each a named function whose name says its guard
 * (`finishStepIfLeaseExpired`, `completeWorkflowsIfNoLiveSteps`), grouped by concern in src/db/queries/.
 */
export * from './queries/common.js';
export * from './queries/workflows.js';
export * from './queries/claims.js';
export * from './queries/capacity.js';
export * from './queries/actAsRules.js';
export * from './queries/outcomes.js';
export * from './queries/steps.js';
export * from './queries/fanouts.js';
export * from './queries/signals.js';
export * from './queries/signalRows.js';
export * from './queries/signalWaits.js';
export * from './queries/deferredSignalMatches.js';
export * from './queries/executors.js';
export * from './queries/leases.js';
export * from './queries/progress.js';
export * from './queries/flows.js';
export * from './queries/gates.js';
export * from './queries/redrive.js';
export * from './queries/subWorkflows.js';
export * from './queries/schedules.js';
export * from './queries/startAt.js';
export * from './queries/lanes.js';
export * from './queries/sizeCaps.js';
export * from './queries/usage.js';
export * from './queries/forkState.js';
export * from './queries/workerTasks.js';
