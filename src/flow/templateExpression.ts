/**
 * The text between a template's braces: `root segment*`, parsed in one left-to-right pass with no
 * regular expressions (grammar in templates.ts). The seed's aliases are read here:
 * `workflow_input` → `input`, `loop_item` → `item`, and `step.NAME.path` → `steps.NAME.result.path`
 * (seed 000's spelling of a step's result). Pure: no I/O, no module state.
 */
import { TemplateError } from '../errors.js';

/** The seed's spellings of two roots. */
const ROOT_ALIASES: Readonly<Record<string, string>> = Object.freeze({ workflow_input: 'input', loop_item: 'item' });

const FORBIDDEN_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** A parsed expression plus what error messages need: the source text of every segment. */
export interface ParsedExpression {
  root: string;
  /** The root as written (before alias normalization). */
  rootText: string;
  path: (string | number)[];
  /** For each path element, the text naming it in a "does not exist" message, e.g. `hits[3]`. */
  labels: string[];
}

function isIdentStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 /* _ */ || c === 36; /* $ */
}

function isNameChar(c: number): boolean {
  return isIdentStart(c) || (c >= 48 && c <= 57) || c === 45; /* - */
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isCanonicalIndex(text: string): boolean {
  if (text.length === 0 || text.length > 15) return false;
  for (let i = 0; i < text.length; i++) if (!isDigit(text.charCodeAt(i))) return false;
  return text === '0' || text.charCodeAt(0) !== 48;
}

function syntaxError(raw: string, problem: string): TemplateError {
  return new TemplateError(`template "${raw}": ${problem}`, { template: raw });
}

function checkSegment(raw: string, name: string): void {
  if (FORBIDDEN_SEGMENTS.has(name)) throw syntaxError(raw, `"${name}" is not allowed in a template path`);
}

/**
 * Parses the text between `{{` and `}}`. `raw` is only used in error messages. One left-to-right
 * pass, no regular expressions.
 */
export function parseExpression(expr: string, raw: string): ParsedExpression {
  let start = 0;
  let end = expr.length;
  while (start < end && isSpace(expr.charCodeAt(start))) start++;
  while (end > start && isSpace(expr.charCodeAt(end - 1))) end--;
  if (start === end) throw syntaxError(raw, 'the template is empty');

  let i = start;
  if (!isIdentStart(expr.charCodeAt(i))) {
    throw syntaxError(raw, `expected a name at the start, got "${expr[i]}"`);
  }
  while (i < end && isNameChar(expr.charCodeAt(i))) i++;
  const rootText = expr.slice(start, i);
  checkSegment(raw, rootText);
  const root = Object.hasOwn(ROOT_ALIASES, rootText) ? (ROOT_ALIASES[rootText] as string) : rootText;

  const path: (string | number)[] = [];
  const labels: string[] = [];
  // Where the label of an index segment starts: the last named segment (or the root).
  let anchor = start;

  while (i < end) {
    const c = expr.charCodeAt(i);
    const segStart = i;
    if (c === 46 /* . */) {
      i++;
      const nameStart = i;
      while (i < end && isNameChar(expr.charCodeAt(i))) i++;
      const name = expr.slice(nameStart, i);
      if (name.length === 0) {
        throw syntaxError(raw, i < end && expr[i] === '.' ? 'empty path segment ".."' : `expected a name after "." at "${expr.slice(segStart, end)}"`);
      }
      if (isCanonicalIndex(name)) {
        path.push(Number(name));
        labels.push(expr.slice(anchor, i));
      } else {
        checkSegment(raw, name);
        path.push(name);
        labels.push(name);
        anchor = nameStart;
      }
    } else if (c === 91 /* [ */) {
      i++;
      const q = expr.charCodeAt(i);
      if (q === 34 /* " */ || q === 39 /* ' */) {
        i++;
        let key = '';
        let closed = false;
        while (i < end) {
          const ch = expr.charCodeAt(i);
          if (ch === 92 /* \ */ && i + 1 < end) {
            key += expr[i + 1];
            i += 2;
          } else if (ch === q) {
            closed = true;
            i++;
            break;
          } else {
            key += expr[i];
            i++;
          }
        }
        if (!closed) throw syntaxError(raw, 'unclosed quoted key');
        if (expr.charCodeAt(i) !== 93 /* ] */) throw syntaxError(raw, 'expected "]" after a quoted key');
        i++;
        checkSegment(raw, key);
        path.push(key);
      } else {
        const numStart = i;
        while (i < end && isDigit(expr.charCodeAt(i))) i++;
        const digits = expr.slice(numStart, i);
        if (i >= end) throw syntaxError(raw, 'unclosed "["');
        if (expr.charCodeAt(i) !== 93 || !isCanonicalIndex(digits)) {
          let close = expr.indexOf(']', numStart);
          if (close < 0 || close > end) close = end;
          throw syntaxError(raw, `"[${expr.slice(numStart, close)}]" is not an index (use [0] or ["key"])`);
        }
        i++;
        path.push(Number(digits));
      }
      labels.push(expr.slice(anchor, i));
    } else {
      throw syntaxError(raw, `unexpected "${expr[i]}" at "${expr.slice(i, end)}"`);
    }
  }
  if (rootText === 'step' && typeof path[0] === 'string') {
    // Seed 000: {{step.NAME.path}} is {{steps.NAME.result.path}}.
    path.splice(1, 0, 'result');
    labels.splice(1, 0, 'result');
    return { root: 'steps', rootText, path, labels };
  }
  return { root, rootText, path, labels };
}

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13;
}
