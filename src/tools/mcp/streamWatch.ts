/**
 * A fetch for the SDK's Streamable HTTP client transport that notices when the server goes away
 * in the middle of a call. The SDK reads a call's answer from the SSE stream of its POST; when
 * that stream breaks it only reports an error and the call waits until its timeout. Here every
 * such stream is passed through unchanged, and a read that fails (the server died, the network
 * dropped) calls `onDropped` first, so the connection can fail the calls in flight at once.
 */
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';

export function watchedFetch(onDropped: (err: unknown) => void, base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const response = await base(url, init);
    if ((init?.method ?? 'GET').toUpperCase() !== 'POST' || !response.ok || !response.body) return response;
    if (!isEventStream(response.headers.get('content-type'))) return response;
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (err) {
          // Our own close() aborts the transport's requests: that is no loss to report.
          if (!init?.signal?.aborted) onDropped(err);
          controller.error(err);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

function isEventStream(contentType: string | null): boolean {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'text/event-stream';
}
