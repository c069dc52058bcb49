/**
 * The one place where an error's text is cut before it is stored on a row (`workflow_steps.error`,
 * `workflows.error`): every statement that writes an error column passes it through
 * {@link storableError} (src/db/queries/common.ts `errorParam`). A stored message is at most
 * {@link STORED_ERROR_BYTES} bytes of UTF-8, cut on a code point (never inside a surrogate pair,
 * so never half an emoji) and ended by a marker saying how long it was. NUL and lone surrogates,
 * which jsonb refuses, become U+FFFD.
 *
 * Redaction comes first and happens where the text is made: a tool's error in the tool registry
 * (registry.ts redactError), a remote server's text in cutRemoteText, so the cut here never sees
 * a secret whole or leaves half of one. Pure: no I/O, no module state. User documentation:
 * docs/security.md, docs/caps-and-budgets.md.
 */
import type { ErrorData } from './errors.js';

/** The most a stored error message may take: 1 kB of UTF-8, the marker included. */
export const STORED_ERROR_BYTES = 1024;

/** The error as it may be stored: its message (and a redrive's original message) cut to the documented size. */
export function storableError<E extends ErrorData>(error: E): E {
  let out = error;
  const message = typeof error.message === 'string' ? cutErrorText(error.message) : error.message;
  if (message !== error.message) out = { ...out, message };
  const details = error.details as { error?: unknown } | undefined;
  if (isErrorData(details?.error)) {
    const inner = storableError(details.error);
    if (inner !== details.error) out = { ...out, details: { ...details, error: inner } };
  }
  return out;
}

/** `text` in at most `maxBytes` bytes of UTF-8: cut on a code point, with a marker of its full length. */
export function cutErrorText(text: string, maxBytes = STORED_ERROR_BYTES): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
  if (clean.length <= maxBytes / 3 || Buffer.byteLength(clean, 'utf8') <= maxBytes) return clean;
  const marker = `… (cut: ${[...clean].length} characters in all)`;
  const budget = maxBytes - Buffer.byteLength(marker, 'utf8');
  let used = 0;
  let end = 0;
  for (const ch of clean) {
    const bytes = utf8Bytes(ch.codePointAt(0)!);
    if (used + bytes > budget) break;
    used += bytes;
    end += ch.length;
  }
  return `${clean.slice(0, end)}${marker}`;
}

function utf8Bytes(cp: number): number {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

function isErrorData(value: unknown): value is ErrorData {
  return typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string';
}
