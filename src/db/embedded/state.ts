/** The folder's layout and its state file `server.json`: credentials and where the server listens. */
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import { errCode, errMessage } from './helpers.js';

const StateSchema = z.object({
  version: z.literal(1),
  user: z.string().min(1),
  password: z.string().min(1),
  database: z.string().min(1),
  url: z.string().nullable(),
  port: z.number().int().positive().nullable(),
  pid: z.number().int().positive().nullable(),
  pgVersion: z.string().optional(),
  startedAt: z.string().optional(),
});
export type State = z.infer<typeof StateSchema>;

export function clusterDir(dataDir: string): string {
  return path.join(dataDir, 'pg');
}

export function stateFile(dataDir: string): string {
  return path.join(dataDir, 'server.json');
}

export async function readState(dataDir: string): Promise<State | null> {
  const file = stateFile(dataDir);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return null;
    throw new ConfigError(`Cannot read ${file} (${errMessage(err)}). Run stepd as the user that started the embedded PostgreSQL, or set DATABASE_URL.`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${file} is not valid JSON (${errMessage(err)}). Restore it, or delete ${dataDir} to start from an empty database.`);
  }
  const parsed = StateSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(
      `${file} is not a stepd server file. Restore it, or delete ${dataDir} to start from an empty database.`,
      parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    );
  }
  return parsed.data;
}

export async function writeState(dataDir: string, state: State): Promise<void> {
  const file = stateFile(dataDir);
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await fs.rename(tmp, file);
}
