/**
 * No file in src/ is longer than 400 lines (STYLE.md: one concept per file; issue 27). A file that
 * grows past it is split by concept, not trimmed by packing lines. Lines are counted as `wc -l`
 * does, plus a last line without a newline.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { listTsFiles } from './importGraph.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MAX_LINES = 400;

/** The lines of a text: `a\nb\n` and `a\nb` both have 2. */
export function lineCount(text: string): number {
  if (text === '') return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe('file length', () => {
  it('counts lines as an editor shows them', () => {
    expect(lineCount('')).toBe(0);
    expect(lineCount('a')).toBe(1);
    expect(lineCount('a\nb\n')).toBe(2);
    expect(lineCount('a\nb')).toBe(2);
  });

  it(`no file in src/ is over ${MAX_LINES} lines`, () => {
    const files = listTsFiles(path.join(ROOT, 'src'));
    expect(files.length).toBeGreaterThan(200);
    const long = files
      .map((f) => ({ file: path.relative(ROOT, f), lines: lineCount(readFileSync(f, 'utf8')) }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });
});
