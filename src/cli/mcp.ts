/**
 * `stepd mcp`: the workflow operations as MCP tools on stdio, for an agent (Claude Desktop, an
 * MCP client) that starts stepd as a subprocess. Every tool acts as one user (--user, else
 * STEPD_USER, else the OS user) through the SQL contract, with that user's permissions from the
 * config file. stdout carries the protocol only; logs go to stderr.
 */
import type { Command } from 'commander';
import { callerUser } from '../api/callerUser.js';
import { CliError, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';

interface McpFlags extends DatabaseFlags {
  user?: string;
  config?: string;
}

export function registerMcp(program: Command): void {
  withDatabaseOptions(
    program
      .command('mcp')
      .description('serve the workflow operations as MCP tools on stdio (start, get, list, approve, reject, cancel, retry, validate…) for an agent')
      .option('--user <user>', 'the user every tool acts as: workflows run as them, approvals are recorded as theirs (default: $STEPD_USER, else your OS user name)')
      .option('--config <path>', 'configuration file for permissions, caps and the tool list (default: ./stepd.config.json if present)'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd mcp --user alice
  DATABASE_URL=postgres://… STEPD_USER=alice stepd mcp --config /etc/stepd/stepd.config.json

In an MCP client's configuration (Claude Desktop's claude_desktop_config.json):
  "mcpServers": { "stepd": { "command": "node", "args": ["/path/to/stepd/bin/stepd.js", "mcp", "--user", "alice"],
                             "env": { "DATABASE_URL": "postgres://…" } } }

Tools: start_workflow, get_workflow, list_workflows, approve_step, reject_step, cancel_workflow,
retry_workflow, send_signal, validate_flow, list_flows, list_tools. See docs/mcp-server.md.`,
    )
    .action(async (flags: McpFlags) => {
      const user = callerUser(flags.user);
      if (!user) throw new CliError('no user: pass --user NAME (or set STEPD_USER)');
      await withDatabase(flags, (ctx) => serve(ctx, user, flags.config));
    });
}

async function serve(ctx: ClientContext, user: string, configPath: string | undefined): Promise<void> {
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
