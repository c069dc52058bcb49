/**
 * `stepd prune`: deletes at once what retention would (docs/operations.md, "Retention"):
 * finished top-level workflows past their status's retention, with their steps and
 * sub-workflows, and old signals. The retention comes from the config file's `retention`
 * section, each status overridable on the command line; `--dry-run` lists instead of deleting.
 * As any client: through delete_workflows, so a role deletes only its own workflows.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { loadConfigSection } from '../configSection.js';
import { parseDuration } from '../flow/duration.js';
import type { RetentionPolicy } from '../retention/retentionPolicy.js';
import { CliError, EXIT, errorMessage, out, outJson, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';

export const PRUNE_SUMMARY = 'delete finished workflows (with their steps and sub-workflows) and signals older than their retention; --dry-run lists them';

interface PruneFlags extends DatabaseFlags {
  config?: string;
  completed?: string;
  failed?: string;
  cancelled?: string;
  signals?: string;
  name?: string;
  user?: string;
  dryRun?: boolean;
  json?: boolean;
}

export function registerPrune(program: Command): void {
  withDatabaseOptions(
    program
      .command('prune')
      .description(PRUNE_SUMMARY)
      .option('--config <path>', 'config file whose "retention" section applies (default: ./stepd.config.json if present and no duration is given)')
      .option('--completed <duration>', 'delete completed workflows finished longer ago than this (e.g. 30d)')
      .option('--failed <duration>', 'delete failed workflows finished longer ago than this')
      .option('--cancelled <duration>', 'delete cancelled workflows cancelled longer ago than this')
      .option('--signals <duration>', 'delete signals sent longer ago than this (trusted roles only)')
      .option('--name <name>', 'only workflows of this name')
      .option('--user <user>', 'only workflows run as this user (created_by)')
      .option('--dry-run', 'list what would be deleted (the first 200 per status), delete nothing')
      .option('--json', 'print the report as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd prune --dry-run                       # the config's "retention" section, listed only
  stepd prune --completed 7d --failed 30d     # delete now
  stepd prune --completed 0s --name nightly   # every finished "nightly" workflow

The daemon's watchdog leader does the same in small batches at every sweep when the config has
"retention": {"completed": "30d", "failed": "90d", "cancelled": "30d", "signals": "7d"}.
A live workflow is never deleted, nor a parent whose sub-workflow still runs; a role that is not
trusted deletes only the workflows it started (the same rule as delete_workflows).`,
    )
    .action(async (flags: PruneFlags) => {
      const policy = await policyFrom(flags);
      await withDatabase(flags, async (ctx) => {
        const { pruneOnce, prunedWorkflows } = await import('../retention/prune.js');
        const { countWorkflowAndStepRows } = await import('../db/queries/retention.js');
        const report = await pruneOnce(ctx.pool, policy, {
          ...(flags.name !== undefined ? { name: flags.name } : {}),
          ...(flags.user !== undefined ? { user: flags.user } : {}),
          ...(flags.dryRun ? { dryRun: true } : {}),
        });
        const rows = await countWorkflowAndStepRows(ctx.pool);
        if (flags.json) return outJson({ dryRun: !!flags.dryRun, ...report, remaining: rows });
        if (flags.dryRun) {
          for (const c of report.candidates ?? []) {
            out(`would delete workflow ${c.id} (${c.name}, ${c.status} ${new Date(c.finished_at).toISOString()}, user ${c.created_by ?? '-'}): ${c.steps} step row(s), ${c.children} sub-workflow(s)`);
          }
          out(`dry run: ${prunedWorkflows(report)} workflow(s)${policy.signals !== undefined ? ` and ${report.signals} signal(s)` : ''} would be deleted; nothing was`);
          return;
        }
        const per = Object.entries(report.workflows).map(([s, n]) => `${n} ${s}`).join(', ');
        out(`deleted ${prunedWorkflows(report)} workflow(s) (${per || 'none'})${policy.signals !== undefined ? ` and ${report.signals} signal(s)` : ''}; ${rows.workflows} workflow row(s) and ${rows.steps} step row(s) remain`);
      });
    });
}

/** The config's retention, each status overridden by its flag; refused when nothing would be pruned. */
async function policyFrom(flags: PruneFlags): Promise<RetentionPolicy> {
  const keys = ['completed', 'failed', 'cancelled', 'signals'] as const;
  // Durations on the command line are the whole policy unless --config is named too.
  const given = keys.some((k) => flags[k] !== undefined);
  const file = flags.config ?? (!given && existsSync('stepd.config.json') ? 'stepd.config.json' : undefined);
  let policy: RetentionPolicy = {};
  if (file !== undefined) {
    try {
      policy = { ...(await loadConfigSection(file, 'retention')) };
    } catch (err) {
      throw new CliError(`cannot read the retention of ${file}: ${errorMessage(err)}`, EXIT.invalid);
    }
  }
  for (const key of keys) {
    const text = flags[key];
    if (text === undefined) continue;
    try {
      policy[key] = parseDuration(text);
    } catch (err) {
      throw new CliError(`--${key}: ${errorMessage(err)}`, EXIT.invalid);
    }
  }
  if (Object.values(policy).every((v) => v === undefined)) {
    throw new CliError('nothing to prune: give --completed, --failed, --cancelled or --signals (a duration like 30d), or a config file with a "retention" section', EXIT.invalid);
  }
  return policy;
}
