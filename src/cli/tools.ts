/** `stepd tools`: every tool the daemon can call, with its description and input schema. */
import type { Command } from 'commander';
import { createLogger } from '../logger.js';

export function registerTools(program: Command): void {
  program
    .command('tools')
    .description('list every tool (built-ins and configured MCP servers) with its description and input schema')
    .option('--config <path>', 'configuration file (default: ./stepd.config.json if present)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  stepd tools\n  stepd tools --config ./stepd.config.json --json')
    .action(async (flags: { config?: string; json?: boolean }) => {
      // Loaded here, not at the top: the MCP client is heavy and other commands do not need it.
      const { buildToolbox, DEFAULT_CONFIG_FILE, loadToolConfig } = await import('../tools/toolbox.js');
      const { Secrets } = await import('../secrets.js');
      const secrets = new Secrets();
      const log = createLogger({ level: 'warn', secrets });
      const file = await loadToolConfig(flags.config, process.cwd(), secrets);
      if (file.path === undefined) {
        // On stderr, so `--json` output stays one JSON document.
        process.stderr.write(`no ${DEFAULT_CONFIG_FILE} found in ${process.cwd()}; showing the built-in tools only (use --config PATH)\n`);
      }
      const toolbox = buildToolbox(file.config, file.path, log, { secrets });
      try {
        const tools = [];
        const failures: { server: string; error: string }[] = [];
        for (const prefix of toolbox.registry.prefixes()) {
          const provider = [...toolbox.mcp].find((p) => p.prefix === prefix);
          try {
            // One provider at a time: a server that does not answer must not hide the built-ins.
            const listed = (provider ? await provider.list() : await toolbox.registry.listOf(prefix)) ?? [];
            tools.push(...listed.map((t) => ({ ...t, name: `${prefix}.${t.name}` })));
          } catch (err) {
            failures.push({ server: prefix, error: err instanceof Error ? err.message : String(err) });
          }
        }
        if (flags.json) {
          process.stdout.write(`${JSON.stringify({ config: file.path ?? null, tools, failures }, null, 2)}\n`);
        } else {
          for (const t of tools) {
            process.stdout.write(`${t.name}${t.description ? `  — ${t.description}` : ''}\n`);
            if (t.inputSchema !== undefined) process.stdout.write(`    input: ${JSON.stringify(t.inputSchema)}\n`);
          }
          for (const f of failures) process.stdout.write(`! ${f.server}: not reachable (${f.error})\n`);
        }
        if (failures.length > 0) process.exitCode = 1;
      } finally {
        await toolbox.registry.close();
      }
    });
}
