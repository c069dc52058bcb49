import { describe, it, expect } from 'vitest';
import { parseDuration } from '../../src/flow/duration.js';

describe('parseDuration', () => {
  it('takes numbers as milliseconds', () => {
    expect(parseDuration(0)).toBe(0);
    expect(parseDuration(1500)).toBe(1500);
  });

  it('reads each unit', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2s')).toBe(2_000);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    expect(parseDuration('0s')).toBe(0);
  });

  it('reads fractions', () => {
    expect(parseDuration('1.5s')).toBe(1_500);
    expect(parseDuration('0.5h')).toBe(1_800_000);
  });

  it('reads compound durations from the largest unit down', () => {
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('1d2h3m4s5ms')).toBe(86_400_000 + 7_200_000 + 180_000 + 4_000 + 5);
    expect(parseDuration('1m500ms')).toBe(60_500);
  });

  it('ignores surrounding whitespace', () => {
    expect(parseDuration(' 5m ')).toBe(300_000);
  });

  it('rejects anything else with a clear message', () => {
    for (const bad of ['', '5', 'abc', '5 m', '5x', '1.s', '.5s', 's', '5m1h', '1h1h', '1h 30m', '5mm', '1e3ms', 'P1D']) {
      expect(() => parseDuration(bad), bad).toThrow(/invalid duration/);
    }
    expect(() => parseDuration('5')).toThrow('missing unit');
    expect(() => parseDuration('30m1h')).toThrow('largest to smallest');
  });

  it('rejects negative and non-finite values', () => {
    expect(() => parseDuration(-1)).toThrow('cannot be negative');
    expect(() => parseDuration('-5s')).toThrow('cannot be negative');
    expect(() => parseDuration(Number.NaN)).toThrow('invalid duration');
    expect(() => parseDuration(Number.POSITIVE_INFINITY)).toThrow('invalid duration');
  });

  it('rejects durations too large to count in milliseconds', () => {
    expect(() => parseDuration('99999999999999999d')).toThrow('too large');
  });
});
