/**
 * `stepd mcp`'s server, wired up: the workflow operations as MCP tools on stdio for one user, over
 * the client pool the command opened, with that user's permissions, caps and tool list from the
 * config file, and resource notifications from `stepd_events`. A composition root beside the
 * daemon's (startDaemon.ts), so that `src/cli/` never imports `src/mcpServer/`. It serves until
 * stdin closes or SIGINT/SIGTERM.
 */
import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from '../db/tables.js';

/** The database the command connected to (src/cli/common.ts's ClientContext has these). */
export interface McpStdioDatabase {
  url: string;
  schema: string;
  pool: pg.Pool;
  db: Kysely<Database>;
}

export async function serveMcpStdio(ctx: McpStdioDatabase, user: string, configPath: string | undefined): Promise<void> {
  // Loaded here: the MCP SDK and the toolbox are heavy and other commands do not need them.
  const [{ StdioServerTransport }, { createMcpServer }, { Operations }, toolbox, { Secrets }, { createLogger }, { createPermissionPolicy }, { resolveCaps }, { listAllTools }, notifications, { ToolCatalog }] =
    await Promise.all([
      import('@modelcontextprotocol/sdk/server/stdio.js'),
      import('../mcpServer/createMcpServer.js'),
      import('../api/operations.js'),
      import('../tools/toolbox.js'),
      import('../secrets.js'),
      import('../logger.js'),
      import('../tools/permissions.js'),
      import('../flow/caps.js'),
      import('../mcpServer/listAllTools.js'),
      import('../mcpServer/resourceNotifications.js'),
      import('../tools/toolCatalog.js'),
    ]);
  const secrets = new Secrets();
  const log = createLogger({ level: process.env.STEPD_LOG_LEVEL ?? 'warn', secrets });
  const file = await toolbox.loadToolConfig(configPath, process.cwd(), secrets);
  const tools = toolbox.buildToolbox(file.config, file.path, log, { secrets });
  const ops = new Operations({
    pool: ctx.pool,
    db: ctx.db,
    schema: ctx.schema,
    permissions: createPermissionPolicy(file.config.permissions),
    caps: resolveCaps(file.config.caps),
    // The agent's database role may not be trusted: whom it may act as is said before anything is written.
    actAs: { clients: file.config.clients },
    admins: file.config.api?.admins ?? [],
    listTools: (servers) => listAllTools(tools, { servers }),
    // start_workflow and validate_flow refuse unknown tools as stepd validate does: the built-ins
    // always, MCP servers' tools when this process has their configuration (--config).
    toolLookup: () => new ToolCatalog(tools),
  });
  const server = createMcpServer(ops, user, { log });
  const subscribed = notifications.prepareResourceSubscriptions(server);
  const transport = new StdioServerTransport();
  let live: ReturnType<typeof notifications.startResourceNotifications> | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      transport.onclose = () => resolve();
      const stop = () => resolve();
      process.stdin.once('end', stop);
      process.stdin.once('close', stop);
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      server
        .connect(transport)
        .then(() => {
          live = notifications.startResourceNotifications(server, subscribed, { url: ctx.url, schema: ctx.schema, log });
        })
        .catch(reject);
    });
  } finally {
    await (await live)?.close();
    await server.close().catch(() => {});
    await tools.registry.close();
  }
}
