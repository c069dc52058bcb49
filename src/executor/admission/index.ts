/**
 * src/executor/admission/ — the pipeline's first stage: `new` workflows become `running`, their
 * flows compiled and frozen, the acting user checked, their first steps created (claimed as they
 * are created where slots allow). Runs beside the claim loop. Imports core/ and transitions/.
 *
 * - admission.ts — one admission transaction (admitWorkflows).
 * - admissionLocks.ts — its lock wait: a workflow that met a lock held elsewhere is tried again later.
 * - admissionLane.ts — admissions beside the loop, one at a time, backing off alone.
 * - admissionPace.ts — how many to admit while ready steps wait; startAtAlarm.ts — delayed starts.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
