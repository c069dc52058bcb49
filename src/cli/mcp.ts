/**
 * `stepd mcp`: the workflow operations as MCP tools on stdio, for an agent (Claude Desktop, an
 * MCP client) that starts stepd as a subprocess. Every tool acts as one user (--user, else
 * STEPD_USER, else the OS user) through the SQL contract, with that user's permissions from the
 * config file. stdout carries the protocol only; logs go to stderr. This file is the command; the
 * server is wired in src/daemon/mcpStdio.ts.
 */
import type { Command } from 'commander';
import { callerUser } from '../api/callerUser.js';
import { CliError, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';

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
retry_workflow, send_signal, validate_flow, list_flows, list_schedules, list_tools,
fork_workflow, cancel_workflows, retry_workflows. See docs/mcp-server.md.`,
    )
    .action(async (flags: McpFlags) => {
      const user = callerUser(flags.user);
      if (!user) throw new CliError('no user: pass --user NAME (or set STEPD_USER)');
      // The MCP SDK, the toolbox and the server are wired in src/daemon/ and load only here.
      const { serveMcpStdio } = await import('../daemon/mcpStdio.js');
      await withDatabase(flags, (ctx) => serveMcpStdio(ctx, user, flags.config));
    });
}
