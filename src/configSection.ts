/**
 * One top-level section of the config file, for the commands that need only that section
 * (`stepd retry`: `caps`; `stepd prune`: `retention`). Only that section's `${VAR}`s are
 * resolved, so a variable left unset for an MCP server, a token or a webhook (which only the
 * daemon and the tool commands use) does not stop them; one the section itself names is still
 * an error that names the variable. The section is checked as `loadConfigFile` checks it.
 */
import { parseConfigFile, readConfigJson, type StepdFileConfig } from './configFile.js';

export type ConfigSectionName = 'caps' | 'retention';

export async function loadConfigSection<K extends ConfigSectionName>(
  path: string,
  section: K,
  env: Record<string, string | undefined> = process.env,
): Promise<StepdFileConfig[K]> {
  const json = await readConfigJson(path);
  // Not an object: the whole file is refused, as loadConfigFile refuses it.
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return parseConfigFile(json, env, path)[section];
  const raw = (json as Record<string, unknown>)[section];
  return parseConfigFile(raw === undefined ? {} : { [section]: raw }, env, path)[section];
}
