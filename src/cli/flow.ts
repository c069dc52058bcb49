/**
 * `stepd flow put|list|show`: the flow registry (table `flows`, sql/0009). Versions are numbered
 * by the database and never change; a workflow inserted with `flow` NULL starts the latest
 * version of the flow named like it (or `flow_version`), pinned at admission.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { withTransaction } from '../db/connect.js';
import { listFlowsLatest, listFlowVersions, loadFlowVersion, putFlowVersionUnlessLatestIsSame } from '../db/queries/flows.js';
import { flowNameProblem } from '../flow/flowName.js';
import { validateFlow } from '../flow/validate.js';
import { missingFlowMessage } from '../api/missingFlowMessage.js';
import { CliError, note, out, outJson, parseLimit, readJsonFile, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { formatWhen, table } from '../api/views/format.js';

interface PutFlags extends DatabaseFlags {
  name?: string;
  by?: string;
  json?: boolean;
}

export function registerFlow(program: Command): void {
  const flow = program
    .command('flow')
    .description('the flow registry: store named, versioned flows and start them by name (stepd run NAME)')
    .addHelpText(
      'after',
      `
Examples:
  stepd flow put examples/purchase.json                   # prints: purchase version 1
  stepd flow list
  stepd flow show purchase@1
  stepd run purchase --input '{"item": "GPU", "amount": 1200}' --follow

More: docs/flow-language.md (the registry, inputSchema, gates).

Versions are numbered 1, 2, … by the database and never change. Storing JSON equal to the
latest version stores nothing and prints that version again. A workflow started by name runs
the version that was latest when the executor admitted it, for its whole life.`,
    );

  withDatabaseOptions(
    flow
      .command('put')
      .description('validate a flow file and store it as the next version of its name')
      .argument('<file>', 'flow JSON file (either form)')
      .option('--name <name>', 'the flow name (default: the file name without .json)')
      .option('--by <user>', 'recorded as created_by (default: the database role; another name only as a trusted role: sql/0023)')
      .option('--json', 'print {name, version, created} as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd flow put research.json                  # name "research"
  stepd flow put flows/v2.json --name research
  stepd flow put research.json --json           # {"name":"research","version":2,"created":true}

The flow is validated as \`stepd validate\` does (shape, graph, inputSchema); an invalid flow is
not stored (exit 1). The executor validates every version again when it starts one.`,
    )
    .action(async (file: string, flags: PutFlags) => {
      const name = flags.name ?? path.basename(file).replace(/\.json$/i, '');
      checkName(name);
      const json = await readJsonFile(file, 'flow file');
      const issues = validateFlow(json);
      if (issues.length > 0) {
        throw new CliError(`${file} is not a valid flow (${issues.length} issue(s)); nothing was stored:\n${issues.map((i) => `  ${i.path || '(flow)'}: ${i.message}`).join('\n')}`);
      }
      await withDatabase(flags, async (ctx) => {
        const stored = await withTransaction(ctx.pool, (client) =>
          putFlowVersionUnlessLatestIsSame(client, { name, flow: json, createdBy: flags.by ?? null }),
        );
        if (flags.json) outJson({ name, version: stored.version, created: stored.created });
        else out(stored.created ? `${name} version ${stored.version}` : `${name} version ${stored.version} (unchanged: the latest version is the same flow)`);
      });
    });

  withDatabaseOptions(
    flow
      .command('list')
      .description('list the registered flows with their latest version, or every version of one flow')
      .argument('[name]', 'list the versions of this flow')
      .option('--limit <n>', 'at most this many flows (default: 1000)', '1000')
      .option('--json', 'print a JSON array'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd flow list
  stepd flow list research        # every version of "research", newest first
  stepd flow list --json`,
    )
    .action(async (name: string | undefined, flags: DatabaseFlags & { limit: string; json?: boolean }) => {
      const limit = parseLimit(flags.limit);
      await withDatabase(flags, async (ctx) => {
        const now = new Date();
        if (name !== undefined) {
          const versions = await listFlowVersions(ctx.pool, name);
          if (versions.length === 0) throw new CliError(`no flow named ${JSON.stringify(name)} is registered (see: stepd flow list)`);
          if (flags.json) {
            outJson(versions.map((v) => ({ name: v.name, version: v.version, createdAt: v.created_at.toISOString(), createdBy: v.created_by })));
            return;
          }
          for (const line of table([['VERSION', 'STORED', 'BY'], ...versions.map((v) => [String(v.version), formatWhen(v.created_at, now), v.created_by ?? '-'])])) out(line);
          return;
        }
        const rows = await listFlowsLatest(ctx.pool, limit);
        if (flags.json) {
          outJson(rows.map((r) => ({ name: r.name, version: r.version, versions: r.versions, createdAt: r.created_at.toISOString(), createdBy: r.created_by })));
          return;
        }
        if (rows.length === 0) {
          out('no flows registered yet (store one with: stepd flow put FILE)');
          return;
        }
        for (const line of table([
          ['NAME', 'LATEST', 'VERSIONS', 'STORED', 'BY'],
          ...rows.map((r) => [r.name, String(r.version), String(r.versions), formatWhen(r.created_at, now), r.created_by ?? '-']),
        ])) {
          out(line);
        }
      });
    });

  withDatabaseOptions(
    flow
      .command('show')
      .description('print a stored flow: the latest version, or NAME@VERSION')
      .argument('<name>', 'NAME or NAME@VERSION')
      .option('--json', 'print {name, version, createdAt, createdBy, flow} as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd flow show research               # the latest version's JSON (a header goes to stderr)
  stepd flow show research@2 > v2.json
  stepd flow show research --json`,
    )
    .action(async (ref: string, flags: DatabaseFlags & { json?: boolean }) => {
      const { name, version } = parseFlowRef(ref);
      await withDatabase(flags, async (ctx) => {
        const row = await loadFlowVersion(ctx.pool, name, version);
        if (!row) throw new CliError(await missingFlowMessage(ctx.pool, name, version));
        if (flags.json) {
          outJson({ name: row.name, version: row.version, createdAt: row.created_at.toISOString(), createdBy: row.created_by, flow: row.flow });
          return;
        }
        note(`# ${row.name} version ${row.version}, stored ${row.created_at.toISOString()}${row.created_by ? ` by ${row.created_by}` : ''}`);
        out(JSON.stringify(row.flow, null, 2));
      });
    });
}

/** The registry's rules (flowName.ts; the database checks them again, sql/0023). */
function checkName(name: string): void {
  if (!name) throw new CliError('the flow name must not be empty (give --name NAME)');
  const problem = flowNameProblem(name);
  if (problem) throw new CliError(`flow name ${JSON.stringify(name)} refused: ${problem}; nothing was stored`);
}

/** `NAME` or `NAME@VERSION` (the last `@` followed only by digits). */
export function parseFlowRef(ref: string): { name: string; version: number | null } {
  const m = /^(.+)@(\d+)$/.exec(ref);
  if (!m) return { name: ref, version: null };
  const version = Number(m[2]);
  if (!Number.isSafeInteger(version) || version < 1 || version > 2_147_483_647) throw new CliError(`version must be a whole number from 1 (got ${JSON.stringify(m[2])})`);
  return { name: m[1]!, version };
}
