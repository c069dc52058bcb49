/**
 * The MCP reference servers from npm (devDependencies), as a user would configure them:
 * `@modelcontextprotocol/server-everything` over stdio and over Streamable HTTP (a child process
 * on a free port, which a test may kill with SIGKILL and start again on the same port),
 * `server-memory` and `server-filesystem` over stdio. Nothing here needs the network.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StdioServerConfig } from '../../src/configFile.js';
import { tempDirSync } from '../helpers/isolation.js';
import { freePort } from '../helpers/ports.js';

const bin = (name: string) => fileURLToPath(new URL(`../../node_modules/.bin/${name}`, import.meta.url));

export const EVERYTHING_BIN = bin('mcp-server-everything');

/** server-everything over stdio. */
export function everythingStdio(): StdioServerConfig {
  return { command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] };
}

/** server-memory over stdio, its knowledge graph in a fresh temporary file. */
export function memoryStdio(): StdioServerConfig {
  return { command: process.execPath, args: [bin('mcp-server-memory')], env: { MEMORY_FILE_PATH: join(tempDirSync('stepd-memory-'), 'memory.jsonl') } };
}

/** server-filesystem over stdio, allowed to use `dir` only. */
export function filesystemStdio(dir: string): StdioServerConfig {
  return { command: process.execPath, args: [bin('mcp-server-filesystem'), dir] };
}

export interface EverythingHttp {
  /** http://127.0.0.1:PORT/mcp */
  url: string;
  /** SIGKILL, as a crash would: no session is closed, no answer finished. */
  kill(): Promise<void>;
  /** Starts it again on the same port (after `kill`), waiting until it listens. */
  start(): Promise<void>;
  close(): Promise<void>;
  /** What the server printed so far. */
  output(): string;
}

/** server-everything in `streamableHttp` mode on a free port (PORT, as its README says). */
export async function everythingHttp(): Promise<EverythingHttp> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  let text = '';
  const kill = async (): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = once(c, 'exit');
    c.kill('SIGKILL');
    await exited;
  };
  const start = async (): Promise<void> => {
    const c = spawn(process.execPath, [EVERYTHING_BIN, 'streamableHttp'], {
      cwd: tempDirSync('stepd-everything-'),
      env: { PATH: process.env.PATH ?? '', PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = c;
    const listening = new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        text += chunk.toString('utf8');
        if (text.includes(`listening on port ${port}`)) resolve();
      };
      c.stdout!.on('data', onData);
      c.stderr!.on('data', onData);
      c.once('exit', (code, signal) => reject(new Error(`server-everything exited (${code ?? signal}) before listening:\n${text.slice(-2_000)}`)));
    });
    const timer = setTimeout(() => c.kill('SIGKILL'), 20_000);
    try {
      await listening;
    } finally {
      clearTimeout(timer);
    }
  };
  await start();
  return { url: `http://127.0.0.1:${port}/mcp`, kill, start, close: kill, output: () => text };
}
