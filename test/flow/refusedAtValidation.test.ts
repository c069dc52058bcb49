import { describe, expect, it } from 'vitest';
import { validateFlow } from '../../src/flow/validate.js';

/** A canonical flow from its steps; the first step is the start. */
function flow(steps: Record<string, unknown>): unknown {
  return { start: Object.keys(steps)[0], steps };
}

describe('validation refuses what would only fail after the workflow started', () => {
  it('refuses a templated tool name at steps.NAME.tool, naming the step', () => {
    const issues = validateFlow(flow({ call: { tool: '{{input.srv}}.echo', args: { x: 1 }, done: true } }));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe('steps.call.tool');
    expect(issues[0]!.message).toMatch(/step "call": tool names are not templates/);
  });

  it('refuses any "{{" in a tool name, even without a closing "}}"', () => {
    const issues = validateFlow(flow({ call: { tool: 'mcp.{{x', done: true } }));
    expect(issues.map((i) => i.path)).toEqual(['steps.call.tool']);
  });

  it('accepts a literal tool name with templated args', () => {
    expect(validateFlow(flow({ call: { tool: 'srv.echo', args: { x: '{{input.srv}}' }, done: true } }))).toEqual([]);
  });

  const fanout = (join: Record<string, unknown>) =>
    flow({
      fan: { parallel: ['a', 'b'], join: 'merge' },
      a: { tool: 'core.noop' },
      b: { tool: 'core.noop' },
      merge: join,
    });

  it('refuses {{results}} in the output of a join step: the output is resolved after the step ran', () => {
    const issues = validateFlow(fanout({ tool: 'core.echo', args: { r: '{{results}}' }, done: true, output: { all: '{{results.a}}' } }));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe('steps.merge.output');
    expect(issues[0]!.message).toMatch(/step "merge": "results" .* only available in the join step's args/);
  });

  it("refuses {{results}} in a tool step's own forEach.items (resolved from its result after it ran)", () => {
    const issues = validateFlow(
      flow({
        fan: { parallel: ['a'], join: 'merge' },
        a: { tool: 'core.noop' },
        merge: { tool: 'core.echo', forEach: { items: '{{results.a}}', step: 'each' } },
        each: { tool: 'core.noop' },
      }),
    );
    expect(issues.map((i) => i.path)).toEqual(['steps.merge.forEach.items']);
  });

  it("accepts {{results}} in a join step's args and {{result}} in its output", () => {
    expect(validateFlow(fanout({ tool: 'core.echo', args: { r: '{{results}}' }, done: true, output: '{{result}}' }))).toEqual([]);
  });
});
