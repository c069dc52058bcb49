/**
 * What the CLI, the MCP server and the dashboard say when the database refuses a write: a tenant
 * rule (sql/0038, SQLSTATE 42501) is permission_denied with the rule and its hint (who may).
 */
import { describe, expect, it } from 'vitest';
import { toOperationError } from '../../src/api/errors.js';
import { toCliError } from '../../src/cli/common.js';

function pgError(code: string, message: string, hint?: string): Error {
  return Object.assign(new Error(message), { code, ...(hint ? { hint } : {}) });
}

describe('a database refusal of another tenant’s work', () => {
  it('is permission_denied naming the rule, with the hint', () => {
    const err = toOperationError(pgError('42501', 'stepd: workflow 7 was started by role a for user b; role c may cancel only …', 'Ask the role that started it.'));
    expect(err.code).toBe('permission_denied');
    expect(err.message).toBe('stepd: workflow 7 was started by role a for user b; role c may cancel only …. Ask the role that started it.');
    expect(toOperationError(pgError('42501', 'permission denied for table workflows')).message).toBe('permission denied for table workflows');
    const cli = toCliError(pgError('42501', 'stepd: step 3 … may ready only …', 'Name approvers.'));
    expect(cli.message).toBe('stepd: step 3 … may ready only …. Name approvers.');
  });
});
