/**
 * toStepResult: how a tools/call result becomes a step result. Pure: no server, no database.
 * The convenient forms (structuredContent, JSON text, plain text) stay; anything with a
 * non-text block keeps every block in its MCP shape.
 */
import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import { contentBlock, toStepResult, type CallResultLike } from '../../src/tools/mcp/results.js';

const site = { server: 'kb', tool: 't' };
const map = (result: CallResultLike) => toStepResult(result, site);
const text = (t: string) => ({ type: 'text', text: t });
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('MCP results as step results', () => {
  it('prefers structuredContent over every content block', () => {
    expect(map({ structuredContent: { a: 1 }, content: [text('{"a":1}'), { type: 'image', data: PNG, mimeType: 'image/png' }] })).toEqual({ a: 1 });
  });

  it('parses one JSON text block and keeps other text as text', () => {
    expect(map({ content: [text('{"hits":[{"id":1}]}')] })).toEqual({ hits: [{ id: 1 }] });
    expect(map({ content: [text(' 42 ')] })).toBe(42);
    expect(map({ content: [text('just words')] })).toBe('just words');
    expect(map({ content: [text('')] })).toBe('');
  });

  it('joins several text blocks with newlines and parses the whole when it is JSON', () => {
    expect(map({ content: [text('first'), text('second')] })).toBe('first\nsecond');
    expect(map({ content: [text('[1,'), text('2]')] })).toEqual([1, 2]);
  });

  it('maps no content to null', () => {
    expect(map({ content: [] })).toBeNull();
    expect(map({})).toBeNull();
  });

  it('keeps text, an image and a resource link together, in order, with text alongside', () => {
    const result = map({
      content: [
        text('A tiny image:'),
        { type: 'image', data: PNG, mimeType: 'image/png', annotations: { priority: 1 }, _meta: { x: 1 } },
        text('{"not":"parsed here"}'),
        { type: 'resource_link', uri: 'test://static/resource/1', name: 'Resource 1', mimeType: 'text/plain', description: 'one', _meta: {}, extra: 5 },
      ],
    });
    expect(result).toEqual({
      text: 'A tiny image:\n{"not":"parsed here"}',
      content: [
        { type: 'text', text: 'A tiny image:' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        { type: 'text', text: '{"not":"parsed here"}' },
        { type: 'resource_link', uri: 'test://static/resource/1', name: 'Resource 1', mimeType: 'text/plain', description: 'one' },
      ],
    });
  });

  it('keeps audio as base64 with its MIME type, text null when there is no text block', () => {
    expect(map({ content: [{ type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' }] })).toEqual({
      text: null,
      content: [{ type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' }],
    });
  });

  it('keeps a resource link with only its required fields', () => {
    expect(contentBlock({ type: 'resource_link', uri: 'file:///a.txt', name: 'a.txt', title: 'A', size: 12 })).toEqual({
      type: 'resource_link',
      uri: 'file:///a.txt',
      name: 'a.txt',
      title: 'A',
    });
  });

  it('keeps embedded resources with their text or blob, dropping _meta inside and out', () => {
    const result = map({
      content: [
        { type: 'resource', resource: { uri: 'test://doc', mimeType: 'text/markdown', text: '# Doc', _meta: { y: 1 } }, _meta: { z: 2 } },
        { type: 'resource', resource: { uri: 'test://bin', mimeType: 'application/octet-stream', blob: 'AAEC' } },
      ],
    });
    expect(result).toEqual({
      text: null,
      content: [
        { type: 'resource', resource: { uri: 'test://doc', mimeType: 'text/markdown', text: '# Doc' } },
        { type: 'resource', resource: { uri: 'test://bin', mimeType: 'application/octet-stream', blob: 'AAEC' } },
      ],
    });
  });

  it('keeps only the type of a block it does not know, and drops fields of the wrong type', () => {
    expect(map({ content: [text('x'), { type: 'hologram', depth: 3 }, 17] })).toEqual({
      text: 'x',
      content: [{ type: 'text', text: 'x' }, { type: 'hologram' }, { type: 'unknown' }],
    });
    expect(contentBlock({ type: 'image', data: 42, mimeType: 'image/png' })).toEqual({ type: 'image', mimeType: 'image/png' });
    expect(contentBlock({ type: 'resource', resource: 'nope' })).toEqual({ type: 'resource', resource: {} });
  });

  it('keeps a huge base64 image whole (the resultBytes cap, not the mapping, bounds it)', () => {
    const data = 'QUJD'.repeat(2_000_000); // 8 MB of base64
    const result = map({ content: [text('big'), { type: 'image', data, mimeType: 'image/png' }] }) as { content: { data?: string }[] };
    expect(result.content[1]?.data).toBe(data);
  });

  it('passes odd unicode text through unchanged, in single blocks and alongside an image', () => {
    const odd = 'e\u0301 \u{1F469}\u200D\u{1F52C} \u05E9\u05DC\u05D5\u05DD \uFEFF \u{10FFFF} \u2028';
    expect(map({ content: [text(odd)] })).toBe(odd);
    expect(map({ content: [text(`"${odd}"`)] })).toBe(odd);
    expect(map({ content: [text(odd), { type: 'image', data: PNG, mimeType: 'image/png' }] })).toEqual({
      text: odd,
      content: [
        { type: 'text', text: odd },
        { type: 'image', data: PNG, mimeType: 'image/png' },
      ],
    });
  });

  it('turns an isError result into a non-retryable tool_error whatever blocks it has', () => {
    let caught: unknown;
    try {
      map({ isError: true, content: [text('no such document'), { type: 'image', data: PNG, mimeType: 'image/png' }] });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(StepError);
    expect(caught).toMatchObject({ code: 'tool_error', message: 'no such document', retryable: false });
  });
});
