/** Why a flow named to start or show is not registered: `stepd run NAME`, `stepd flow show`, and the operations (dashboard, MCP tools) say the same. */
import { loadFlowVersion } from '../db/queries/flows.js';

/** Why NAME[@VERSION] was not found: no such flow, or no such version (naming the latest). */
export async function missingFlowMessage(db: Parameters<typeof loadFlowVersion>[0], name: string, version: number | null): Promise<string> {
  const latest = version === null ? undefined : await loadFlowVersion(db, name, null);
  if (latest) return `flow ${JSON.stringify(name)} has no version ${version} (its latest version is ${latest.version}; see: stepd flow list ${name})`;
  return `no flow named ${JSON.stringify(name)} is registered (store one with: stepd flow put FILE --name ${name}; see: stepd flow list)`;
}
