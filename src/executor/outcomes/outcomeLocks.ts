/**
 * How long a transaction recording outcomes waits for a row lock someone else holds (another
 * executor's settle, or a client's `SELECT … FOR UPDATE` on a workflow or step row), and what it
 * does past that wait. A shared batch waits briefly, then hands the workflow that met the lock
 * to the alone lane (OutcomeQueue) and records the others; the alone lane waits longer, then
 * serves the other workflows waiting there first and asks again later. Nothing is dropped: the
 * step stays `running` under this executor, and the watchdog leaves it alone while this executor
 * lives and holds its outcome (recovery.ts, rescueOwnStepsPastLease). A shared batch past its
 * wait fails with RowHeldElsewhere (core/rowHeldElsewhere.ts) saying where it met the lock.
 */

/**
 * A shared batch's lock wait (`lock_timeout`, set in its BEGIN). Short: every outcome of the
 * batch waits with it. Past it the batch is redone without the workflow that met the lock.
 */
export const SHARED_LOCK_WAIT_MS = 200;

/**
 * How long a transaction of the alone lane (and the watchdog's rescues) waits for its workflow's
 * rows. Past it the outcomes go to the back of the lane, so one held workflow never holds the others.
 */
export const ALONE_LOCK_WAIT_MS = 2_000;
