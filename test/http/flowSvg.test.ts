/**
 * The flow graph and the attempts timeline as SVG: every name, condition, tool and error is
 * escaped (and characters that hide or reorder text are made visible), and the bars sit where
 * the rows' times say. Pure: no database, no browser.
 */
import { describe, expect, it } from 'vitest';
import { flowGraph } from '../../src/flow/flowGraph.js';
import { compileFlow } from '../../src/flow/validate.js';
import { renderTimeline, ticks, timelineBars, type TimelineRow } from '../../src/http/dashboard/attemptsTimeline.js';
import { renderFlowSvg, stateLine } from '../../src/http/dashboard/flowSvg.js';
import { labelText } from '../../src/http/dashboard/labelText.js';

const EVIL = '<script>alert(1)</script>';
const ATTR = '"><img src=x onerror=alert(2)>';
const BIDI = 'pay\u202Egnp.exe';

function compiled(raw: unknown) {
  const c = compileFlow(raw);
  if (!c.ok) throw new Error(JSON.stringify(c.issues));
  return c.flow;
}

/** No markup from the data: the only tags are the ones the renderer writes. */
function expectOnlyOwnTags(svg: string): void {
  const tags = new Set([...svg.matchAll(/<\/?([a-zA-Z]+)/g)].map((m) => m[1]));
  for (const t of tags) expect(['svg', 'title', 'defs', 'marker', 'path', 'g', 'rect', 'text', 'a', 'line', 'tspan']).toContain(t);
  expect(svg).not.toMatch(/<script|<img/i);
  // No attribute the data made: quotes inside values are escaped, so without the values no event handler is left.
  for (const [tag] of svg.matchAll(/<[a-zA-Z][^>]*>/g)) expect(tag.replace(/="[^"]*"/g, '=""')).not.toMatch(/\son[a-z]+=/i);
}

describe('flow graph SVG', () => {
  const hostile = {
    start: EVIL,
    steps: {
      [EVIL]: { tool: `core.echo`, next: ATTR },
      [ATTR]: { branch: [{ if: `input.x < 3 && input.y > "${EVIL}"`, then: BIDI }], default: '😀🎉 ünïcödé ' + 'x'.repeat(150) },
      [BIDI]: { workflow: { name: 'review' } },
      ['😀🎉 ünïcödé ' + 'x'.repeat(150)]: { tool: 'core.echo', done: true },
    },
  };

  it('escapes step names, conditions and labels, in text and attributes', () => {
    const g = flowGraph(compiled(hostile), [{ id: '1', name: BIDI, status: 'pending', attempt: 1, fanoutId: null, itemIndex: null, error: null, readyAt: null, childId: '7"><x' }]);
    const svg = renderFlowSvg(g).value;
    expectOnlyOwnTags(svg);
    expect(svg).toContain('data-step="&lt;script&gt;alert(1)&lt;/script&gt;"');
    expect(svg).toContain('data-step="&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"');
    expect(svg).toContain('&lt;script&gt;alert(1)&lt;/script&gt;</text>');
    expect(svg).toContain('input.x &lt; 3 &amp;&amp;');
    // The child's id goes into the link URL encoded.
    expect(svg).toContain('href="/workflows/7%22%3E%3Cx"');
  });

  it('makes text-reordering characters visible and cuts long names between code points', () => {
    const g = flowGraph(compiled(hostile), []);
    const svg = renderFlowSvg(g).value;
    // Only the data-* attributes (what tests and scripts select by) keep the name as it is.
    expect(svg.replace(/data-[a-z]+="[^"]*"/g, '')).not.toContain('\u202E');
    expect(svg).toContain('pay\uFFFDgnp.exe');
    expect(svg).toMatch(/>😀🎉 ünïcödé x{10,20}…<\/text>/);
    expect(labelText('a\u200Bb\u2066c\u0007d\u2028e', 40)).toBe('a\uFFFDb\uFFFDc\uFFFDd\uFFFDe');
    expect(labelText('😀'.repeat(10), 5)).toBe('😀😀😀😀…');
  });

  it('places every node and edge (dagre), the start above what follows', () => {
    const svg = renderFlowSvg(flowGraph(compiled({ start: 'a', steps: { a: { tool: 'core.echo', next: 'b' }, b: { tool: 'core.echo' } } }), [])).value;
    const y = (name: string) => Number(new RegExp(`data-step="${name}"[^>]*transform="translate\\([\\d.]+,([\\d.]+)\\)"`).exec(svg)![1]);
    expect(y('a')).toBeLessThan(y('b'));
    expect(svg).toMatch(/<path d="M[\d.]+,[\d.]+( L[\d.]+,[\d.]+)+" marker-end="url\(#flow-arrow\)"\/>/);
  });

  it('says how many places a step ran in, its retries and lost attempts', () => {
    const base = { id: 'w', kind: 'tool' as const, tool: 'core.echo', detail: 'core.echo', start: false, rows: 5 };
    expect(stateLine({ ...base, state: 'running', counts: { done: 3, running: 1 }, retries: 2, lost: 1 })).toBe('3 done · 1 running · 2 retries · 1 lost');
    expect(stateLine({ ...base, state: 'none', counts: {}, retries: 0, lost: 0 })).toBe('not reached');
    expect(stateLine({ ...base, kind: 'fork', state: 'done', counts: { done: 1 }, retries: 0, lost: 0, items: 12 })).toBe('done · 12 items');
  });
});

describe('attempts timeline', () => {
  const at = (ms: number) => new Date(Date.parse('2026-11-27T12:00:00Z') + ms).toISOString();
  const row = (id: number, extra: Partial<TimelineRow>): TimelineRow => ({
    id: String(id),
    name: 'step',
    status: 'done',
    attempt: 1,
    maxAttempts: 3,
    itemIndex: null,
    error: null,
    createdAt: at(0),
    readyAt: null,
    startedAt: null,
    completedAt: null,
    ...extra,
  });

  it('has a waiting bar from creation to start and a run bar from start to end (to now while running)', () => {
    const rows = [
      row(1, { name: 'fetch', status: 'failed', startedAt: at(0), completedAt: at(100), error: { code: 'lost', message: 'gone' } }),
      row(2, { name: 'fetch', status: 'done', attempt: 2, createdAt: at(100), readyAt: at(600), startedAt: at(600), completedAt: at(700) }),
      row(3, { name: 'review', status: 'pending', createdAt: at(700) }),
      row(4, { name: 'slow', status: 'running', createdAt: at(700), startedAt: at(800) }),
    ];
    const tl = timelineBars(rows, new Date(at(1000)))!;
    expect(tl.spanMs).toBe(1000);
    expect(tl.bars.map((b) => [b.row.id, b.state, b.lost, b.waitFrom, b.waitTo, b.run?.from, b.run?.to])).toEqual([
      ['1', 'failed', true, 0, 0, 0, 100],
      ['2', 'done', false, 100, 600, 600, 700],
      ['3', 'waiting', false, 700, 1000, undefined, undefined],
      ['4', 'running', false, 700, 800, 800, 1000],
    ]);
    const svg = renderTimeline(tl).value;
    expect(svg).toContain('data-row-id="1" data-attempt="1" data-state="failed" data-lost="true"');
    expect(svg).toContain('class="bar st-failed lost"');
    expect([...svg.matchAll(/class="wait"/g)]).toHaveLength(3);
  });

  it('keeps the newest rows past the cap and counts the rest', () => {
    const rows = Array.from({ length: 250 }, (_, i) => row(i + 1, { startedAt: at(i), completedAt: at(i + 1), createdAt: at(i) }));
    const tl = timelineBars(rows, new Date(at(300)), 200)!;
    expect(tl.bars).toHaveLength(200);
    expect(tl.omitted).toBe(50);
    expect(tl.bars[0]!.row.id).toBe('51');
    expect(timelineBars([], new Date())).toBeUndefined();
  });

  it('escapes names and errors', () => {
    const tl = timelineBars([row(1, { name: EVIL, status: 'failed', startedAt: at(0), completedAt: at(5), error: { code: ATTR, message: EVIL } })], new Date(at(10)))!;
    const svg = renderTimeline(tl).value;
    expectOnlyOwnTags(svg);
    expect(svg).toContain('data-step="&lt;script&gt;alert(1)&lt;/script&gt;"');
  });

  it('marks round times across the span', () => {
    expect(ticks(1000)).toEqual([0, 200, 400, 600, 800, 1000]);
    expect(ticks(90_000)).toEqual([0, 15_000, 30_000, 45_000, 60_000, 75_000, 90_000]);
    expect(ticks(1).length).toBeGreaterThan(0);
  });
});
