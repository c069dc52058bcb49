/** The config's `retention`, `notify` and `approvalLinks` sections (docs/operations.md). */
import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { ConfigError } from '../../src/errors.js';
import { Secrets } from '../../src/secrets.js';

function issuesOf(fn: () => unknown): { path: string; message: string }[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('expected a ConfigError');
}

describe('day-two config', () => {
  it('reads retention durations, webhooks with a secret from the environment (a secret to redact), and approval links', () => {
    const secrets = new Secrets();
    const config = parseConfigFile(
      {
        retention: { completed: '30d', failed: '90d', cancelled: '12h', signals: '7d' },
        notify: [{ on: ['step.waiting', 'workflow.failed'], url: 'https://hooks.example.com/stepd', secret: '${HOOK_SECRET}' }],
        approvalLinks: { baseUrl: 'https://stepd.example.com', expiresIn: '2h' },
      },
      { HOOK_SECRET: 'a-long-hook-secret-value' },
      'stepd.config.json',
      secrets,
    );
    expect(config.retention).toEqual({ completed: 30 * 86_400_000, failed: 90 * 86_400_000, cancelled: 12 * 3_600_000, signals: 7 * 86_400_000 });
    expect(config.notify).toEqual([{ on: ['step.waiting', 'workflow.failed'], url: 'https://hooks.example.com/stepd', secret: 'a-long-hook-secret-value' }]);
    expect(config.approvalLinks).toEqual({ baseUrl: 'https://stepd.example.com', expiresIn: 7_200_000 });
    expect(secrets.redact('signed with a-long-hook-secret-value')).not.toContain('a-long-hook-secret-value');
  });

  it('names each bad key, and never quotes a secret', () => {
    const issues = issuesOf(() =>
      parseConfigFile({
        retention: { completed: 'soon', kept: '1d' },
        notify: [{ on: ['workflow.done'], url: 'ftp://x', secret: 'short' }],
        approvalLinks: { expiresIn: '100d' },
      }),
    );
    const paths = issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['retention.completed', 'retention.kept', 'notify[0].on[0]', 'notify[0].url', 'notify[0].secret', 'approvalLinks.expiresIn']));
    expect(JSON.stringify(issues)).not.toContain('"short"');
  });
});
