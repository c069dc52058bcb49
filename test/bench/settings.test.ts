/** The bench's command line: what it accepts, what it refuses, and its help. */
import { describe, expect, it } from 'vitest';
import { BENCH_USAGE, SCENARIOS, benchSettingsFrom, parseFlags, wantsHelp } from '../../scripts/bench/settings.js';

describe('bench settings', () => {
  it('reads flags over variables, in both --name value and --name=value forms', () => {
    const s = benchSettingsFrom({ BENCH_RUNS: '7', BENCH_ONLY: 'io' }, ['--runs', '2', '--only=chain,throughput', '--accounting']);
    expect(s.runs).toBe(2);
    expect(s.only).toEqual(['throughput', 'chain']);
    expect(s.accounting).toBe(true);
  });

  it('names an unknown flag as unknown, even without a value, and a known one that lacks its value', () => {
    expect(() => parseFlags(['--bogus'])).toThrow('unknown flag --bogus');
    expect(() => parseFlags(['--runs'])).toThrow('--runs needs a value');
    expect(() => benchSettingsFrom({}, ['--only', 'nope'])).toThrow(/unknown scenario\(s\) nope/);
  });

  it('runs the floor in a default run, and alone with --only floor', () => {
    expect(benchSettingsFrom({}, []).only).toContain('floor');
    const s = benchSettingsFrom({}, ['--only', 'floor,throughput,pgboss', '--size', 'small']);
    expect(s.only).toEqual(['throughput', 'floor', 'pgboss']);
    expect(s.sizes.floor).toBeGreaterThan(0);
    expect(s.sizes.floorHops).toBeGreaterThan(0);
  });

  it('answers --help and -h with a usage text that lists every scenario and flag', () => {
    expect(wantsHelp(['--help'])).toBe(true);
    expect(wantsHelp(['--only', 'io', '-h'])).toBe(true);
    expect(wantsHelp(['--only', 'io'])).toBe(false);
    for (const name of SCENARIOS) expect(BENCH_USAGE).toContain(name);
    for (const flag of ['--only', '--size', '--runs', '--io-concurrency', '--compare', '--accounting']) expect(BENCH_USAGE).toContain(flag);
  });
});
