export { createMcpProviders, McpServerProvider } from './provider.js';
export type { McpProbeResult, McpProviderOptions, StepdCallMeta } from './provider.js';
export { classifyMcpError, parseJsonText, toStepResult } from './results.js';
