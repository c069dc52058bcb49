import { describe, expect, it } from 'vitest';
import { parseWakeup } from '../../src/executor/wakeups/wakeupHint.js';

const p = (fields: Record<string, unknown>) => JSON.stringify({ schema: 'stepd', ...fields });

describe('a wake-up is a hint', () => {
  it('names what to look for: new workflows, redrives, ready steps, deferred signal matches, a cancellation to check', () => {
    expect(parseWakeup(p({ table: 'signal_deferred_matches', status: 'deferred' }), 'stepd')).toEqual({ kind: 'signalDeferred' });
    expect(parseWakeup(p({ table: 'workflows', id: 7, status: 'new' }), 'stepd')).toEqual({ kind: 'admit' });
    expect(parseWakeup(p({ table: 'workflows', id: 7, status: 'running' }), 'stepd')).toEqual({ kind: 'redrive' });
    expect(parseWakeup(p({ table: 'workflow_steps', id: 9, status: 'ready' }), 'stepd')).toEqual({ kind: 'stepReady' });
    expect(parseWakeup(p({ table: 'workflows', id: 7, status: 'cancelled' }), 'stepd')).toEqual({ kind: 'cancelled', workflowId: '7' });
    expect(parseWakeup(p({ table: 'workflows', id: '123456789012345678', status: 'cancelled' }), 'stepd')).toEqual({ kind: 'cancelled', workflowId: '123456789012345678' });
  });

  it('ignores other schemas, look-alike schema names, tables and statuses no trigger sends, ids that are not ids, and text that is not a JSON object', () => {
    const ignored = [
      p({ schema: 'other', table: 'workflows', id: 7, status: 'cancelled' }),
      p({ schema: 'stepd\u200b', table: 'workflows', id: 7, status: 'cancelled' }),
      p({ schema: '\u0455tepd', table: 'workflows', id: 7, status: 'cancelled' }),
      p({ table: 'pg_authid', id: 7, status: 'cancelled' }),
      p({ table: 'workflow_steps', id: 9, status: 'cancelled' }),
      p({ table: 'signal_deferred_matches', status: 'ready' }),
      p({ table: 'workflows', id: 7, status: 'failed' }),
      p({ table: 'workflows', id: 7, status: 7 }),
      p({ table: 'workflows', id: -7, status: 'cancelled' }),
      p({ table: 'workflows', id: 1e308, status: 'cancelled' }),
      p({ table: 'workflows', id: '07', status: 'cancelled' }),
      p({ table: 'workflows', id: '\uff17', status: 'cancelled' }),
      p({ table: 'workflows', id: '7\u0660', status: 'cancelled' }),
      p({ table: 'workflows', id: '1'.repeat(20), status: 'cancelled' }),
      p({ table: 'workflows', id: { $gt: 0 }, status: 'cancelled' }),
      'not json',
      'null',
      '[]',
      '"stepd"',
    ];
    for (const payload of ignored) expect(parseWakeup(payload, 'stepd'), payload).toBeUndefined();
  });
});
