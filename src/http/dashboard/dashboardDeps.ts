/**
 * What the dashboard's pages and actions are given (src/http/app.ts builds it): the operations,
 * a client pool's Kysely for the list, the sessions and, if shown, the capacity gauges.
 */
import type { Kysely } from 'kysely';
import type { Operations } from '../../api/operations.js';
import type { CapacityGauges } from '../../db/queries/capacity.js';
import type { Database } from '../../db/tables.js';
import type { Sessions } from '../sessions.js';

export interface DashboardDeps {
  operations: Operations;
  /** A client pool's Kysely, for the list's filtered read. */
  db: Kysely<Database>;
  sessions: Sessions;
  /** Ready steps waiting for concurrency keys and rate tokens (capacityPanel.ts); left out: not shown. */
  capacity?: () => Promise<CapacityGauges>;
}
