/**
 * Graph checks over fan-out regions: every branch of a fan-out reaches its join (or ends),
 * seed-form `join` markers agree with their fan-out, no step is unreachable, and `item` is
 * used only inside a forEach. Fills in the join a fork infers from its branches' markers.
 */
import type { CompiledFlow, CompiledStep } from './compiled.js';
import type { FlowIssue } from './spec.js';

interface WalkResult {
  /** Seed-form join markers met at chain ends: join name → steps that name it. */
  markers: Map<string, string[]>;
  visited: Set<string>;
}

export function checkRegions(flow: CompiledFlow): FlowIssue[] {
  const issues: FlowIssue[] = [];
  const reachable = new Set<string>();
  const inForEach = new Set<string>();
  /** The steps inside each fan-out's branches (nested fan-outs have their own entry). */
  const regionOf = new Map<string, Set<string>>();
  const joinOf = new Map<string, string | undefined | 'pending'>();

  const forkJoin = (fork: CompiledStep): string | undefined => {
    const t = fork.transition;
    if (t.kind !== 'parallel' && t.kind !== 'forEach') return undefined;
    const known = joinOf.get(fork.name);
    if (known === 'pending') return t.join; // a fan-out nested in itself through a loop
    if (joinOf.has(fork.name)) return known;
    joinOf.set(fork.name, 'pending');
    const starts = t.kind === 'parallel' ? t.branches : [t.step];
    const { markers, visited } = walk(starts, t.join, fork.name);
    regionOf.set(fork.name, visited);
    if (t.kind === 'forEach') for (const v of visited) inForEach.add(v);
    let join = t.join;
    if (join !== undefined) {
      for (const [marker, steps] of markers) {
        if (marker !== join) {
          issues.push({
            path: `steps.${steps[0]}.join`,
            message: `this branch of fan-out "${fork.name}" arrives at "${marker}", but "${fork.name}" joins at "${join}"`,
          });
        }
      }
    } else if (markers.size > 1) {
      issues.push({
        path: `steps.${fork.name}`,
        message: `the branches of fan-out "${fork.name}" arrive at different joins (${[...markers.keys()].join(', ')})`,
      });
    } else if (markers.size === 1) {
      join = [...markers.keys()][0]!;
      t.join = join;
      // The walk did not know this join yet: a branch that reached it by an edge creates it inside
      // the branch, and the fan-out would create it a second time when it settles.
      if (visited.has(join)) issues.push(joinByEdge(fork.name, join));
    }
    // A join named by a marker is referenced, not unreachable, even when the marker is wrong.
    for (const marker of markers.keys()) reachable.add(marker);
    if (join !== undefined) reachable.add(join);
    joinOf.set(fork.name, join);
    return join;
  };

  const walk = (starts: string[], regionJoin: string | undefined, forkName: string | undefined): WalkResult => {
    const markers = new Map<string, string[]>();
    const visited = new Set<string>();
    const stack = starts.map((name) => ({ name, viaEdge: false }));
    while (stack.length > 0) {
      const { name, viaEdge } = stack.pop()!;
      if (visited.has(name)) continue;
      visited.add(name);
      reachable.add(name);
      const step = flow.steps.get(name);
      if (!step) continue;
      if (viaEdge && regionJoin !== undefined && name === regionJoin) {
        issues.push(joinByEdge(forkName ?? '', name));
        continue;
      }
      const push = (to: string | undefined) => to !== undefined && stack.push({ name: to, viaEdge: true });
      push(step.onError);
      const t = step.transition;
      switch (t.kind) {
        case 'next':
          push(t.to);
          break;
        case 'branch':
          t.cases.forEach((c) => push(c.then));
          push(t.default);
          break;
        case 'parallel':
        case 'forEach':
          push(forkJoin(step));
          break;
        case 'arrive':
          if (t.join !== undefined) markers.set(t.join, [...(markers.get(t.join) ?? []), name]);
          break;
        case 'done':
          break;
      }
    }
    return { markers, visited };
  };

  const top = walk([flow.start], undefined, undefined);
  // A fan-out nested in a forEach's branches is inside that forEach too (item/index resolve there).
  for (let grew = true; grew; ) {
    grew = false;
    for (const [fork, region] of regionOf) {
      if (!inForEach.has(fork)) continue;
      for (const v of region) {
        if (inForEach.has(v)) continue;
        inForEach.add(v);
        grew = true;
      }
    }
  }
  for (const [marker, steps] of top.markers) {
    reachable.add(marker);
    for (const s of steps) {
      issues.push({ path: `steps.${s}.join`, message: `step "${s}" arrives at join "${marker}" but is not inside a fan-out (parallel or forEach)` });
    }
  }
  for (const name of flow.steps.keys()) {
    if (!reachable.has(name)) issues.push({ path: `steps.${name}`, message: `step "${name}" is unreachable from start "${flow.start}"` });
  }
  for (const step of flow.steps.values()) {
    if (step.usesItem && reachable.has(step.name) && !inForEach.has(step.name)) {
      issues.push({ path: `steps.${step.name}`, message: 'this step uses item/index but is not inside a forEach' });
    }
  }
  return issues;
}

function joinByEdge(forkName: string, join: string): FlowIssue {
  return {
    path: `steps.${join}`,
    message: `a branch of fan-out "${forkName}" goes to its join "${join}" with a transition; end the branch with "join": "${join}" or with no transition`,
  };
}
