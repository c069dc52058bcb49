/**
 * The test MCP servers as configured for stepd: a stdio server's config entry with its event
 * log, and a uniform view of what each server recorded, so a test can ask "what reached the
 * server" without caring how it is connected.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { StdioServerConfig } from '../../src/configFile.js';
import { isAlive, readEvents, type LoggedEvent } from '../tools/helpers.js';
import type { HttpMcpServer } from './http-server.js';
import type { TestEvent } from './tools.js';
import { tempDirSync } from '../helpers/isolation.js';

export const STDIO_SERVER_FILE = fileURLToPath(new URL('./stdio-server.ts', import.meta.url));
export const HTTP_SERVER_FILE = fileURLToPath(new URL('./http-server.ts', import.meta.url));

/** http-server.ts as a child process, so a test can kill it mid-call and start it again on the same port. */
export interface HttpServerProcess {
  url: string;
  /** Every event of every process started so far, each with its pid (`start` first). */
  events(): LoggedEvent[];
  /** Kills the server process at once (SIGKILL: no goodbye to open connections); resolves once it exited. */
  kill(): Promise<void>;
  /** Starts a new server process on the same port (after kill). */
  restart(): Promise<void>;
  /** Kills the process if it still runs. */
  close(): Promise<void>;
}

async function spawnHttpServer(logFile: string, port: number): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [HTTP_SERVER_FILE], {
    env: { ...process.env, STEPD_TEST_LOG: logFile, STEPD_TEST_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([once(lines, 'line'), once(child, 'exit').then(() => [undefined])]);
  const url = first[0] as string | undefined;
  if (!url) throw new Error('the HTTP MCP server process exited before printing its URL');
  return { child, url };
}

export async function httpServerProcess(): Promise<HttpServerProcess> {
  const logFile = join(tempDirSync('stepd-mcp-http-'), 'events.jsonl');
  let { child, url } = await spawnHttpServer(logFile, 0);
  const port = Number(new URL(url).port);
  const kill = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  };
  return {
    url,
    events: () => readEvents(logFile),
    kill,
    restart: async () => {
      await kill();
      ({ child, url } = await spawnHttpServer(logFile, port));
    },
    close: kill,
  };
}

export interface StdioServerFixture {
  /** The `mcpServers` entry: this Node running stdio-server.ts, logging to `logFile`. */
  config: StdioServerConfig;
  logFile: string;
  events(): LoggedEvent[];
  /** Process ids of every server process started so far (one per connection). */
  pids(): number[];
  /** True when none of the started server processes is alive any more. */
  allExited(): boolean;
}

export function stdioServerFixture(env: Record<string, string> = {}): StdioServerFixture {
  const logFile = join(tempDirSync('stepd-mcp-'), 'events.jsonl');
  const config: StdioServerConfig = { command: process.execPath, args: [STDIO_SERVER_FILE], env: { ...env, STEPD_TEST_LOG: logFile } };
  const events = () => readEvents(logFile);
  const pids = () => events().filter((e) => e.event === 'start').map((e) => e.pid);
  return { config, logFile, events, pids, allExited: () => pids().every((pid) => !isAlive(pid)) };
}

/** Calls of `tool` (every tool when omitted) recorded by a server. */
export function callsOf(events: readonly TestEvent[], tool?: string): TestEvent[] {
  return events.filter((e) => e.event === 'call' && (tool === undefined || e.tool === tool));
}

/** The recorded events of either kind of test server. */
export function eventsOf(server: StdioServerFixture | HttpMcpServer): TestEvent[] {
  return 'stats' in server ? server.stats.events : server.events();
}

/** The `_meta` a recorded call carried (empty when none). */
export function metaOf(event: TestEvent): Record<string, unknown> {
  const meta = event.meta;
  return typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>) : {};
}
