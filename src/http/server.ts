/**
 * Serves a Hono app with @hono/node-server on host:port (127.0.0.1 by default). `close()` stops
 * accepting, ends idle and streaming (SSE) connections, and resolves once the server is closed.
 */
import { serve, type ServerType } from '@hono/node-server';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Hono } from 'hono';
import type { HttpEnv } from './auth.js';
import { DEFAULT_HTTP_HOST } from './httpSettings.js';


export interface RunningHttpServer {
  /** `http://host:port` as clients reach it (the port the kernel picked for port 0). */
  url: string;
  port: number;
  close(): Promise<void>;
}

export function startHttpServer(app: Hono<HttpEnv>, opts: { host?: string; port: number }): Promise<RunningHttpServer> {
  const host = opts.host ?? DEFAULT_HTTP_HOST;
  return new Promise((resolve, reject) => {
    let server: ServerType | undefined;
    const onError = (err: Error) => reject(err);
    server = serve({ fetch: app.fetch, hostname: host, port: opts.port }, (info: AddressInfo) => {
      server!.off('error', onError);
      const shown = info.address.includes(':') ? `[${info.address}]` : info.address;
      resolve({ url: `http://${shown}:${info.port}`, port: info.port, close: () => closeServer(server as Server) });
    });
    server.once('error', onError);
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
