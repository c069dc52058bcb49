/**
 * Bounded label values for tool names. Tool names come from flows, which anyone who may write a
 * workflow row controls: the first `max` distinct names seen (each at most 100 characters) keep
 * their own label, any later one is counted as `other`, so a hostile flow cannot grow the
 * metrics without bound. One instance per metrics registry.
 */
export const OTHER_TOOL = 'other';
/** The label of a step without a tool (gate, timer, pass, fork, sub-workflow). */
export const NO_TOOL = 'none';

export class ToolLabels {
  private readonly seen = new Set<string>();

  constructor(private readonly max = 200) {}

  label(tool: string | null): string {
    if (tool === null || tool === '') return NO_TOOL;
    if (this.seen.has(tool)) return tool;
    if (tool.length > 100 || this.seen.size >= this.max) return OTHER_TOOL;
    this.seen.add(tool);
    return tool;
  }
}
