/**
 * Who may stop the server of a folder: `owner.json`, next to server.json.
 *
 *   {"version": 1, "postmasterPid": 4242, "owner": {pid, started, handle}, "attached": [{…}, …]}
 *
 * The process that starts the postmaster owns it. A process that finds it already running while
 * its owner lives attaches: it uses the server but never stops it. On leaving, the owner hands
 * the server to a live attached process when there is one and stops it only when nobody else uses
 * it; a process whose owner died (SIGKILL, a second signal) inherits the server in its place, so
 * nothing is left running with nobody to stop it. The record only counts for the postmaster it
 * names: a server restarted by someone else is never stopped on the strength of an older record.
 *
 * A member is a process (pid, plus its start time from /proc so a reused pid is not taken for
 * it) and a handle, so that two handles in one process count separately. Every function here
 * runs under the folder's start lock.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { errCode } from './helpers.js';
import { processStartTime, processState } from './processes.js';

const MemberSchema = z.object({
  pid: z.number().int().positive(),
  /** Start time of the process (clock ticks since boot, from /proc/PID/stat); null without /proc. */
  started: z.string().nullable(),
  handle: z.string().min(1),
});
export type Member = z.infer<typeof MemberSchema>;

const OwnershipSchema = z.object({
  version: z.literal(1),
  postmasterPid: z.number().int().positive(),
  owner: MemberSchema,
  attached: z.array(MemberSchema),
});
type Ownership = z.infer<typeof OwnershipSchema>;

export interface Joined {
  role: 'owner' | 'attached';
  /** The server's owner: this member, or the live process that started it. */
  owner: Member;
}

export function ownershipFile(dataDir: string): string {
  return path.join(dataDir, 'owner.json');
}

/** This process, as a new member with its own handle. */
export async function newMember(): Promise<Member> {
  return { pid: process.pid, started: await processStartTime(process.pid), handle: randomBytes(8).toString('hex') };
}

/** The member has just started the postmaster `postmasterPid`: it owns it, nobody is attached. */
export async function claimServer(dataDir: string, postmasterPid: number, me: Member): Promise<Joined> {
  await writeOwnership(dataDir, { version: 1, postmasterPid, owner: me, attached: [] });
  return { role: 'owner', owner: me };
}

/**
 * The member found `postmasterPid` running. It attaches when a live owner is recorded for that
 * postmaster; otherwise (the owner died, or the record is missing or names an older server) it
 * takes charge of it.
 */
export async function joinServer(dataDir: string, postmasterPid: number, me: Member): Promise<Joined> {
  const record = await readOwnership(dataDir);
  if (!record || record.postmasterPid !== postmasterPid) return claimServer(dataDir, postmasterPid, me);
  const attached = await liveMembers(record.attached.filter((m) => m.handle !== me.handle));
  if (record.owner.handle !== me.handle && (await isLive(record.owner))) {
    await writeOwnership(dataDir, { ...record, attached: [...attached, me] });
    return { role: 'attached', owner: record.owner };
  }
  await writeOwnership(dataDir, { ...record, owner: me, attached });
  return { role: 'owner', owner: me };
}

/**
 * The member stops using `postmasterPid`. Returns 'stop' when the server is the member's to stop
 * (it owns it, or its owner died) and nobody else alive uses it; then the record is removed.
 * Otherwise the server stays ('keep'), handed to the next live member when the member owned it.
 */
export async function leaveServer(
  dataDir: string,
  postmasterPid: number,
  me: Member,
): Promise<{ action: 'stop' } | { action: 'keep'; owner: Member | null; handedOver: boolean }> {
  const record = await readOwnership(dataDir);
  if (!record || record.postmasterPid !== postmasterPid) return { action: 'keep', owner: null, handedOver: false };
  const others = await liveMembers([record.owner, ...record.attached].filter((m) => m.handle !== me.handle));
  const [next, ...rest] = others;
  if (!next) {
    await fs.rm(ownershipFile(dataDir), { force: true });
    return { action: 'stop' };
  }
  await writeOwnership(dataDir, { ...record, owner: next, attached: rest });
  return { action: 'keep', owner: next, handedOver: next.handle !== record.owner.handle };
}

/** Forgets every member (the server was stopped by force). */
export async function clearOwnership(dataDir: string): Promise<void> {
  await fs.rm(ownershipFile(dataDir), { force: true });
}

async function isLive(member: Member): Promise<boolean> {
  if ((await processState(member.pid)) === 'gone') return false;
  return member.started === null || (await processStartTime(member.pid)) === member.started;
}

async function liveMembers(members: Member[]): Promise<Member[]> {
  const live: Member[] = [];
  for (const m of members) if (await isLive(m)) live.push(m);
  return live;
}

/** The record, or null when it is missing or unreadable (then nobody's claim can be proven). */
async function readOwnership(dataDir: string): Promise<Ownership | null> {
  let text: string;
  try {
    text = await fs.readFile(ownershipFile(dataDir), 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return null;
    throw err;
  }
  try {
    const parsed = OwnershipSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

async function writeOwnership(dataDir: string, record: Ownership): Promise<void> {
  const file = ownershipFile(dataDir);
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await fs.writeFile(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  await fs.rename(tmp, file);
}
