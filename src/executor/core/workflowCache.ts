/**
 * The compiled definition of each running workflow. A workflow's flow, input, name and user
 * are frozen once it is admitted (the guard trigger enforces it), so caching them is safe.
 */
import { compileFlow, type CompileResult } from '../../flow/validate.js';
import { DEFAULT_CAPS, type Caps } from '../../flow/caps.js';
import type { CompiledFlow } from '../../flow/compiled.js';
import { getWorkflowDefinitions, type Queryable, type WorkflowDefinition } from '../../db/queries.js';

export interface WorkflowInfo {
  id: string;
  name: string;
  input: Record<string, unknown>;
  createdBy: string | null;
  /** The role that wrote it (`created_role`; a child's is its tree's): its lane in the outcome queue. */
  role?: string | null;
  flow: CompiledFlow;
  /** `workflows.priority`, copied onto its steps (sql/0028). */
  priority?: number;
}

export class WorkflowCache {
  private readonly entries = new Map<string, WorkflowInfo>();
  readonly compiler: FlowCompiler;

  constructor(
    private readonly capacity = 2_000,
    caps: Readonly<Caps> = DEFAULT_CAPS,
  ) {
    this.compiler = new FlowCompiler(caps);
  }

  get(id: string): WorkflowInfo | undefined {
    const hit = this.entries.get(id);
    if (hit) {
      // Refresh recency: Map keeps insertion order, so the first key is the least recent.
      this.entries.delete(id);
      this.entries.set(id, hit);
    }
    return hit;
  }

  put(info: WorkflowInfo): void {
    this.entries.delete(info.id);
    this.entries.set(info.id, info);
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  forget(id: string): void {
    this.entries.delete(id);
  }

  /** Returns every requested workflow, loading the ones not cached in one query. */
  async load(db: Queryable, ids: string[]): Promise<Map<string, WorkflowInfo>> {
    const out = new Map<string, WorkflowInfo>();
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      const hit = this.get(id);
      if (hit) out.set(id, hit);
      else missing.push(id);
    }
    if (missing.length > 0) {
      for (const row of await getWorkflowDefinitions(db, missing)) {
        const info = toInfo(row, this.compiler);
        if (info) {
          this.put(info);
          out.set(row.id, info);
        }
      }
    }
    return out;
  }
}

/**
 * Compiles flows under the operator's caps, remembering the last few by their JSON text: many
 * workflows share one flow, and a compiled flow is immutable, so they can share the compiled
 * form too.
 */
export class FlowCompiler {
  private readonly byText = new Map<string, CompileResult>();

  constructor(
    readonly caps: Readonly<Caps> = DEFAULT_CAPS,
    private readonly capacity = 200,
  ) {}

  /**
   * Compiles a flow given as its JSON text (as PostgreSQL returns `flow::text`): a flow seen
   * before costs a map lookup, not a parse.
   */
  compileJsonText(text: string): CompileResult {
    const hit = this.byText.get(text);
    if (hit) return hit;
    let flow: unknown;
    try {
      flow = JSON.parse(text);
    } catch (err) {
      // Valid jsonb that JavaScript cannot parse (nested too deep for its stack).
      return { ok: false, issues: [{ path: '', message: `flow cannot be read: ${(err as Error).message}` }] };
    }
    return this.remember(text, compileFlow(flow, { caps: this.caps }));
  }

  compile(flow: unknown): CompileResult {
    let key: string;
    try {
      key = typeof flow === 'string' ? flow : JSON.stringify(flow);
    } catch {
      // Nested too deep for JSON.stringify: compileFlow reports that as an issue.
      return compileFlow(flow, { caps: this.caps });
    }
    const hit = this.byText.get(key);
    if (hit) return hit;
    return this.remember(key, compileFlow(flow, { caps: this.caps }));
  }

  private remember(key: string, compiled: CompileResult): CompileResult {
    this.byText.set(key, compiled);
    if (this.byText.size > this.capacity) this.byText.delete(this.byText.keys().next().value!);
    return compiled;
  }
}

/** Compiles a stored definition; undefined when its flow is invalid (it was never admitted). */
export function toInfo(row: WorkflowDefinition, compiler?: FlowCompiler): WorkflowInfo | undefined {
  const compiled = compiler ? compiler.compile(row.flow) : compileFlow(row.flow, { caps: DEFAULT_CAPS });
  if (!compiled.ok) return undefined;
  return { id: row.id, name: row.name, input: row.input ?? {}, createdBy: row.created_by, role: row.created_role, flow: compiled.flow, ...(row.priority ? { priority: row.priority } : {}) };
}
