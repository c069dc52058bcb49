import { indent } from './helpers.js';

/** A failure of initdb, pg_ctl or the server itself; `details.log` holds what PostgreSQL said. */
export class EmbeddedPostgresError extends Error {
  readonly code = 'embedded_postgres';
  readonly details: { dataDir: string; log?: string };

  constructor(message: string, details: { dataDir: string; log?: string }) {
    super(details.log ? `${message}\n${indent(details.log)}` : message);
    this.name = 'EmbeddedPostgresError';
    this.details = details;
  }
}
