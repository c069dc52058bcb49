/**
 * A timer's templated duration (`"wait": "{{= input.minutes * 60000 }}"` or `"{{input.delay}}"`),
 * resolved when the timer is created: a number of milliseconds, or a duration text such as
 * `"90s"`. Pure.
 */
import { TemplateError } from '../errors.js';
import { parseDuration } from './duration.js';
import { resolveTemplates, type TemplateScope } from './templates.js';

/** 100 years, as validation allows for a literal wait. */
const MAX_WAIT_MS = 100 * 365 * 86_400_000;

export function resolveWaitMs(stepName: string, template: string, scope: TemplateScope): number {
  const value = resolveTemplates(template, scope);
  let ms: number;
  try {
    ms = parseDuration(value as string | number);
  } catch (err) {
    throw new TemplateError(`wait of step "${stepName}" is not a duration: ${JSON.stringify(value)} (${(err as Error).message})`, { template, value });
  }
  if (!(ms >= 0) || ms > MAX_WAIT_MS) throw new TemplateError(`wait of step "${stepName}" is out of range: ${JSON.stringify(value)}`, { template, value });
  return ms;
}
