/**
 * Flow names people can trust by eye. A registered flow is started by name, so a name that looks
 * like another one ("pаyments" with a Cyrillic "а", "payments" followed by a zero-width space, a
 * right-to-left override) lets one service pass its flow off as another's. A flow name must be:
 *
 *   - free of invisible and format characters: controls, zero-width and joiner characters, bidi
 *     controls, other format characters (Cf), private-use characters, every default-ignorable
 *     code point, separators other than the ASCII space;
 *   - in NFKC form: a name NFKC would change (fullwidth letters, the Kelvin sign, ligatures) is
 *     refused, and the message gives the normalized form (refused rather than normalized, so the
 *     stored name is always the one the client sent);
 *   - of one script among those with look-alike letters: letters of two or more of the scripts
 *     in SCRIPT_RANGES (Latin, Greek, Cyrillic, ...) in one name are refused.
 *
 * The database applies the same rules to every insert into `flows` (sql/0023,
 * stepd_flow_name_problem), with the same ranges: keep SCRIPT_RANGES and INVISIBLE_RANGES equal
 * to the SQL. Pure: no I/O, no module state. User documentation: docs/security.md.
 */
import { nameProblem } from './caps.js';

/** Letters of these scripts (by code point range) may not share one name. Mirrors sql/0023. */
export const SCRIPT_RANGES: readonly { script: string; ranges: readonly (readonly [number, number])[] }[] = [
  {
    script: 'Latin',
    ranges: [[0x41, 0x5a], [0x61, 0x7a], [0xaa, 0xaa], [0xba, 0xba], [0xc0, 0xd6], [0xd8, 0xf6], [0xf8, 0x24f], [0x250, 0x2af], [0x1d00, 0x1d25], [0x1e00, 0x1eff], [0x2c60, 0x2c7f], [0xa720, 0xa7ff], [0xab30, 0xab6f], [0xff21, 0xff3a], [0xff41, 0xff5a]],
  },
  { script: 'Greek', ranges: [[0x370, 0x3ff], [0x1d26, 0x1d2a], [0x1f00, 0x1fff]] },
  { script: 'Cyrillic', ranges: [[0x400, 0x52f], [0x1c80, 0x1c8f], [0x1d2b, 0x1d2b], [0x2de0, 0x2dff], [0xa640, 0xa69f]] },
  { script: 'Coptic', ranges: [[0x2c80, 0x2cff]] },
  { script: 'Armenian', ranges: [[0x531, 0x58f], [0xfb13, 0xfb17]] },
  { script: 'Georgian', ranges: [[0x10a0, 0x10ff], [0x1c90, 0x1cbf], [0x2d00, 0x2d2f]] },
  { script: 'Cherokee', ranges: [[0x13a0, 0x13ff], [0xab70, 0xabbf]] },
  { script: 'Hebrew', ranges: [[0x591, 0x5ff], [0xfb1d, 0xfb4f]] },
  { script: 'Arabic', ranges: [[0x600, 0x6ff], [0x750, 0x77f], [0x870, 0x8ff], [0xfb50, 0xfdff], [0xfe70, 0xfefe]] },
];

/**
 * Invisible and direction-changing code points the database refuses too (sql/0023). The check
 * below refuses these and more (every Cc, Cf, Co, Zl, Zp, Zs but U+0020, default-ignorable).
 */
export const INVISIBLE_RANGES: readonly (readonly [number, number])[] = [
  [0x0, 0x1f], [0x7f, 0x9f], [0xa0, 0xa0], [0xad, 0xad], [0x34f, 0x34f], [0x61c, 0x61c], [0x115f, 0x1160],
  [0x1680, 0x1680], [0x17b4, 0x17b5], [0x180b, 0x180f], [0x2000, 0x200f], [0x2028, 0x202f], [0x205f, 0x206f],
  [0x3000, 0x3000], [0x3164, 0x3164], [0xfe00, 0xfe0f], [0xfeff, 0xfeff], [0xffa0, 0xffa0], [0xfff0, 0xfffb],
  [0xe000, 0xf8ff], [0x1d173, 0x1d17a], [0xe0000, 0xe0fff], [0xf0000, 0x10ffff],
];

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Co}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]|(?! )\p{Zs}/u;

/** What is wrong with a flow name (the registry's, or a workflow's that names a registered flow), or undefined. */
export function flowNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'a flow name must not be empty';
  const basic = nameProblem(name);
  if (basic) return basic;
  const invisible = firstMatch(name, (cp) => INVISIBLE.test(String.fromCodePoint(cp)) || inRanges(cp, INVISIBLE_RANGES));
  if (invisible !== undefined) {
    return `a flow name must not contain invisible, format or direction characters (it has ${codePoint(invisible)}): such names look like another flow's`;
  }
  const normalized = name.normalize('NFKC');
  if (normalized !== name) {
    const odd = firstMatch(name, (cp) => String.fromCodePoint(cp).normalize('NFKC') !== String.fromCodePoint(cp));
    return `a flow name must be in Unicode NFKC form (it has ${odd === undefined ? 'a character NFKC changes' : codePoint(odd)}); use ${JSON.stringify(normalized)} instead`;
  }
  const scripts = scriptsOf(name);
  if (scripts.length > 1) {
    return `a flow name must not mix letters of ${scripts.join(' and ')}: such names look like another flow's (e.g. a Cyrillic "а" in a Latin name)`;
  }
  return undefined;
}

/** The scripts of SCRIPT_RANGES whose letters appear in `name`, in table order. */
export function scriptsOf(name: string): string[] {
  const found = new Set<string>();
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    for (const { script, ranges } of SCRIPT_RANGES) if (inRanges(cp, ranges)) found.add(script);
  }
  return SCRIPT_RANGES.map((s) => s.script).filter((s) => found.has(s));
}

function inRanges(cp: number, ranges: readonly (readonly [number, number])[]): boolean {
  return ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
}

function firstMatch(name: string, test: (cp: number) => boolean): number | undefined {
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    if (test(cp)) return cp;
  }
  return undefined;
}

/** `U+200B`. */
function codePoint(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}
