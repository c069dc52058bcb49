/**
 * The tools a CLI command checks flows against, as `stepd validate` and `stepd run` share them:
 * the configuration (--config, else ./stepd.config.json when present), its caps, and a catalog of
 * the built-in tools and of the MCP servers it names (asked only when a flow uses them).
 */
import type { Caps } from '../flow/caps.js';
import type { ToolCatalog } from '../tools/toolCatalog.js';
import type { LlmConfig } from '../tools/llm/llmConfig.js';
import { errorMessage, note } from './common.js';

export interface ToolCheckFlags {
  config?: string;
  offline?: boolean;
}

export interface ToolCheckSetup {
  caps: Readonly<Caps>;
  catalog: ToolCatalog;
  /** The config's `llm` section (model providers), for the check that a flow's models have one. */
  llm: LlmConfig | undefined;
  /** Whether a configuration file was read (without one, an unknown provider is only a warning). */
  configFound: boolean;
  /** Says which MCP tools went unchecked, and why. */
  noteUnchecked(unchecked: Iterable<string>): void;
  close(): Promise<void>;
}

export async function openToolCheck(flags: ToolCheckFlags): Promise<ToolCheckSetup> {
  // Loaded here, not at the top: the MCP client is heavy and other commands do not need it.
  const { buildToolbox, DEFAULT_CONFIG_FILE, loadToolConfig } = await import('../tools/toolbox.js');
  const { ToolCatalog } = await import('../tools/toolCatalog.js');
  const { resolveCaps } = await import('../flow/caps.js');
  const { createLogger } = await import('../logger.js');
  const { Secrets } = await import('../secrets.js');
  const secrets = new Secrets();
  let file: Awaited<ReturnType<typeof loadToolConfig>>;
  try {
    file = await loadToolConfig(flags.config, process.cwd(), secrets);
  } catch (err) {
    // A config named with --config must load; one merely found in the folder is not what was asked to check.
    if (flags.config !== undefined) throw err;
    note(`note: ${DEFAULT_CONFIG_FILE} in ${process.cwd()} could not be read, so the built-in caps and tools apply: ${errorMessage(err)}`);
    file = { config: {}, secrets };
  }
  // The MCP connection's own log lines would repeat what the warnings say.
  const toolbox = buildToolbox(file.config, file.path, createLogger({ level: 'fatal', secrets }), { secrets });
  return {
    caps: resolveCaps(file.config.caps),
    catalog: new ToolCatalog(toolbox, { connect: flags.offline !== true }),
    llm: file.config.llm,
    configFound: file.path !== undefined,
    noteUnchecked(unchecked) {
      const names = [...new Set(unchecked)].sort();
      if (names.length === 0) return;
      const why = file.path === undefined ? 'no stepd.config.json was found (use --config PATH)' : 'of --offline';
      note(`note: MCP tools not checked because ${why}: ${names.join(', ')}`);
    },
    close: () => toolbox.registry.close(),
  };
}
