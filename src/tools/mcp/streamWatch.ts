/**
 * A fetch for the SDK's Streamable HTTP client transport that notices when the server goes away
 * in the middle of a call. The SDK reads a call's answer from the SSE stream of its POST; when
 * that stream breaks it only reports an error and the call waits until its timeout. Here every
 * such stream is passed through unchanged, and `onDropped` is called first when
 * - a read fails (the server died, the network dropped);
 * - the stream ends cleanly without the answer to a request it carries, and without an event
 *   id the SDK could resume from (a server shutting down closes its streams this way);
 * - resuming a stream that had event ids fails (the GET with Last-Event-ID is refused or cannot
 *   connect): the SDK would retry a few times, then leave the call waiting.
 * so the connection can fail the calls in flight at once.
 */
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';

export function watchedFetch(onDropped: (err: unknown) => void, base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const method = (init?.method ?? 'GET').toUpperCase();
    if (method === 'GET' && new Headers(init?.headers).has('last-event-id')) return resume(url, init, onDropped, base);
    const response = await base(url, init);
    if (method !== 'POST' || !response.ok || !response.body) return response;
    if (!isEventStream(response.headers.get('content-type'))) return response;
    const answers = new AnswerWatch(requestIds(init?.body));
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            // Our own close() aborts the transport's requests: that is no loss to report.
            if (!init?.signal?.aborted && answers.unanswered()) onDropped(new Error('the server closed the answer stream without answering'));
            controller.close();
          } else {
            answers.feed(value);
            controller.enqueue(value);
          }
        } catch (err) {
          if (!init?.signal?.aborted) onDropped(err);
          controller.error(err);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** The SDK resuming a broken answer stream: if that fails, the answer is lost. */
async function resume(url: string | URL, init: RequestInit | undefined, onDropped: (err: unknown) => void, base: FetchLike): Promise<Response> {
  let response: Response;
  try {
    response = await base(url, init);
  } catch (err) {
    if (!init?.signal?.aborted) onDropped(err);
    throw err;
  }
  if (!response.ok) onDropped(new Error(`resuming the answer stream failed: HTTP ${response.status}`));
  return response;
}

function isEventStream(contentType: string | null): boolean {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'text/event-stream';
}

/** The ids of the JSON-RPC requests in a POST body (one message or a batch). */
function requestIds(body: unknown): Set<string> {
  const ids = new Set<string>();
  if (typeof body !== 'string') return ids;
  try {
    const parsed: unknown = JSON.parse(body);
    for (const m of Array.isArray(parsed) ? parsed : [parsed]) {
      if (typeof m === 'object' && m !== null && 'method' in m && 'id' in m) ids.add(JSON.stringify((m as { id: unknown }).id));
    }
  } catch {
    // Not JSON: nothing to watch for.
  }
  return ids;
}

/**
 * Reads an SSE stream as it passes: which requests were answered, and whether the stream had
 * event ids (then the SDK resumes it when it ends early).
 */
class AnswerWatch {
  readonly #waiting: Set<string>;
  readonly #decoder = new TextDecoder();
  #partial = '';
  #data = '';
  #resumable = false;

  constructor(requestIds: Set<string>) {
    this.#waiting = requestIds;
  }

  /** True when a request is still without its answer and the SDK will not resume the stream. */
  unanswered(): boolean {
    return this.#waiting.size > 0 && !this.#resumable;
  }

  feed(chunk: Uint8Array): void {
    if (this.#waiting.size === 0) return;
    const lines = (this.#partial + this.#decoder.decode(chunk, { stream: true })).split(/\r\n|\r|\n/);
    this.#partial = lines.pop() ?? '';
    for (const line of lines) this.#line(line);
  }

  #line(line: string): void {
    if (line === '') {
      this.#dispatch();
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id' && value !== '') this.#resumable = true;
    else if (field === 'data') this.#data += `${value}\n`;
  }

  #dispatch(): void {
    const data = this.#data;
    this.#data = '';
    if (!data) return;
    try {
      const parsed: unknown = JSON.parse(data);
      for (const m of Array.isArray(parsed) ? parsed : [parsed]) {
        if (typeof m === 'object' && m !== null && 'id' in m && ('result' in m || 'error' in m)) this.#waiting.delete(JSON.stringify((m as { id: unknown }).id));
      }
    } catch {
      // Not a JSON-RPC message: the SDK reports it.
    }
  }
}
