/**
 * A real browser for the dashboard tests: Debian's chromium (installed by .ci/run when missing)
 * driven by playwright-core, headless, with a fresh profile folder, closed after the test.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { onCleanup } from '../helpers/db.js';

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

/** The chromium binary, or undefined when none is installed (the browser tests are then skipped). */
export const CHROMIUM = CANDIDATES.find((p): p is string => !!p && existsSync(p));

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function openBrowser(opts: { width?: number; height?: number } = {}): Promise<BrowserContext> {
  if (!CHROMIUM) throw new Error('chromium is not installed (apt-get install -y chromium, or set CHROMIUM_PATH)');
  const profile = await mkdtemp(path.join(os.tmpdir(), 'stepd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: opts.width ?? 1100, height: opts.height ?? 760 },
    timeout: 60_000,
  });
  onCleanup(async () => {
    await context.close().catch(() => {});
    await rm(profile, { recursive: true, force: true });
  });
  return context;
}
