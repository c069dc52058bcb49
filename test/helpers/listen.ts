/**
 * NOTIFYs of one test schema as a separate service hears them: a connection of its own that
 * LISTENs on a channel, closed after the test.
 */
import pg from 'pg';
import { onCleanup, type TestSchema } from './db.js';

/**
 * The JSON payloads sent on `channel` (stepd_events, stepd_wakeup) whose `schema` is this test's,
 * in the order they arrive; listening once this resolves. The channels are database-wide: test
 * files running at the same time send on them for their own schemas.
 */
export async function listenFor<T extends { schema?: unknown } = Record<string, any>>(t: TestSchema, channel: string): Promise<T[]> {
  const listener = new pg.Client({ connectionString: t.url });
  await listener.connect();
  onCleanup(() => listener.end());
  const got: T[] = [];
  listener.on('notification', (m) => {
    if (m.channel !== channel) return;
    const payload = JSON.parse(m.payload ?? '{}') as T;
    if (payload.schema === t.schema) got.push(payload);
  });
  await listener.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
  return got;
}
