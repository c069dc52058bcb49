/**
 * What the operations are given (src/api/operations.ts): the client pool, the config's
 * permissions, caps, clients and admins, and the tools this process knows.
 */
import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { ClientsConfig } from '../configFile.js';
import type { Database } from '../db/tables.js';
import type { Caps } from '../flow/caps.js';
import type { PermissionPolicy } from '../tools/permissions.js';
import type { ToolInfo } from '../tools/tool.js';
import type { ToolLookupFactory } from '../tools/flowToolCheck.js';

export interface OperationsDeps {
  /** A client pool (no executor marker): writes go through the guards. */
  pool: pg.Pool;
  db: Kysely<Database>;
  /** The schema, for messages. */
  schema: string;
  /** The config's tool permissions; without them every tool is allowed. */
  permissions?: PermissionPolicy;
  /** The operator's caps, for validation. */
  caps?: Readonly<Caps>;
  /**
   * Given: check up front that the connection's database role may act as the user (config
   * `clients`), as admission and the daemon's approval check do. Leave it out when the pool's
   * role is trusted anyway (the daemon's own).
   */
  actAs?: { clients: ClientsConfig | undefined };
  /**
   * Users who may cancel and retry any workflow (config `api.admins`); every other user only the
   * workflows it created (`created_by`). Reads stay open to every user.
   */
  admins?: readonly string[];
  /**
   * The pool's database role is shared by every user (the daemon's HTTP side: the dashboard and
   * /mcp): a signal records the role that wrote it, not the user, and triggers start workflows
   * as that role, so only admins (`admins`) may send signals through it. Leave it out when the
   * role is the caller's own (`stepd signal`, `stepd mcp` on the caller's DATABASE_URL).
   */
  sharedRole?: boolean;
  /**
   * The tools the daemon can call (built-ins and configured MCP servers), for listTools;
   * `servers` says which MCP servers are worth asking (the caller may call a tool of theirs).
   */
  listTools?: (servers: (prefix: string) => boolean) => Promise<{ tools: ToolInfo[]; failures?: { server: string; error: string }[] }>;
  /** The tools this process knows: startWorkflow and validateFlow refuse unknown tools and bad literal arguments, as `stepd validate` (src/tools/flowToolCheck.ts). */
  toolLookup?: ToolLookupFactory;
}
