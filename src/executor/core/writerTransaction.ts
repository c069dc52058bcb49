/**
 * An executor transaction with its TxWriter: the writes of every workflow it advances go through
 * one writer, and if it rolls back, the slots and limits reserved for steps it claimed as it
 * created them are given back.
 */
import type pg from 'pg';
import { withTransaction, type TransactionOptions } from '../../db/connect.js';
import type { TxDeps, TxResult } from './txTypes.js';
import { TxWriter, type ClaimOnCreate } from './txWriter.js';

export const emptyTxResult = (): TxResult => ({ cancelledRunning: [], recorded: new Set(), createdWork: false, claimed: [] });

/**
 * Runs `fn` in a transaction with a fresh TxWriter, planned with index scans (see
 * withTransaction's preferIndexScans: its statements touch rows by id). After commit, the workflows it ended are
 * told (TxDeps.onWorkflowsEnded); after a rollback, what it reserved is given back. With
 * `lockTimeoutMs`, a lock not granted in that time fails the transaction (55P03) instead of waiting.
 */
export async function inWriterTransaction<T>(
  deps: TxDeps,
  claim: ClaimOnCreate | undefined,
  fn: (client: pg.PoolClient, w: TxWriter) => Promise<T>,
  opts: Pick<TransactionOptions, 'lockTimeoutMs'> = {},
): Promise<T> {
  let writer: TxWriter | undefined;
  try {
    const result = await withTransaction(deps.pool, async (client) => {
      writer = new TxWriter(client, deps.schema, claim);
      return fn(client, writer);
    }, { ...opts, preferIndexScans: true });
    const ended = (writer as TxWriter | undefined)?.endedWorkflows;
    if (ended && ended.length > 0) deps.onWorkflowsEnded?.(ended);
    return result;
  } catch (err) {
    writer?.releaseClaims();
    throw err;
  }
}
