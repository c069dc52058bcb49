/** A config duration as text ("30d", "2h", "500ms") parsed to milliseconds, for zod schemas of the config file. */
import { z } from 'zod';
import { parseDuration } from './flow/duration.js';

export const durationText = z.string().transform((v, ctx) => {
  try {
    return parseDuration(v);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
