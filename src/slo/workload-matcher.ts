import type { IncomingHttpHeaders } from 'node:http';
import type { MatchConditions, Workload } from '../config/load.js';

/**
 * One set of conditions of one workload, compiled once at start-up so a request costs only
 * comparisons. A workload with alternatives has one rule per alternative, in order.
 */
interface CompiledRule {
  readonly workload: Workload;
  /** Lower-case header names (as Node delivers them) and the exact values required. */
  readonly headerNames: readonly string[];
  readonly headerValues: readonly string[];
  /** Exact path, or the prefix before the trailing "*"; undefined when the path is not a condition. */
  readonly path: string | undefined;
  readonly pathIsPrefix: boolean;
  readonly model: string | undefined;
}

/**
 * Assigns a request to a workload (DESIGN.md section 5): workloads are tried in configured order,
 * the first whose conditions all hold wins, and a request that matches none belongs to the last
 * workload. A workload with a list of alternatives matches when any one of them does. A workload
 * without match rules matches everything (the schema only allows it last).
 *
 * - `header`: the request header (name case-insensitive, as HTTP defines it) has exactly this
 *   value. A header sent twice is compared as Node joins it ("a, b"), so it matches neither value.
 * - `path`: the request path without the query string, compared byte for byte (no decoding);
 *   `/v1/*` matches every path that starts with `/v1/`.
 * - `model`: the `model` field of the JSON request body, exactly. A request whose body names no
 *   model (or is not JSON) does not match a workload that requires one.
 *
 * Matching allocates nothing: it reads the header object Node already built and compares strings.
 */
export class WorkloadMatcher {
  private readonly rules: readonly CompiledRule[];
  private readonly fallback: Workload;

  constructor(workloads: readonly Workload[]) {
    const last = workloads[workloads.length - 1];
    if (last === undefined) throw new Error('WorkloadMatcher needs at least one workload');
    this.fallback = last;
    const everything: MatchConditions = { headers: [], path: undefined, model: undefined };
    this.rules = workloads.flatMap((workload) => (workload.match ?? [everything]).map((conditions) => compile(workload, conditions)));
  }

  /** `path` without the query string; `model` as the request body named it, if it did. */
  match(headers: IncomingHttpHeaders, path: string, model: string | undefined): Workload {
    for (const rule of this.rules) {
      if (matches(rule, headers, path, model)) return rule.workload;
    }
    return this.fallback;
  }
}

function compile(workload: Workload, conditions: MatchConditions): CompiledRule {
  const path = conditions.path;
  const pathIsPrefix = path !== undefined && path.endsWith('*');
  return {
    workload,
    headerNames: conditions.headers.map(([name]) => name),
    headerValues: conditions.headers.map(([, value]) => value),
    path: pathIsPrefix ? path.slice(0, -1) : path,
    pathIsPrefix,
    model: conditions.model,
  };
}

function matches(rule: CompiledRule, headers: IncomingHttpHeaders, path: string, model: string | undefined): boolean {
  if (rule.model !== undefined && rule.model !== model) return false;
  if (rule.path !== undefined && !(rule.pathIsPrefix ? path.startsWith(rule.path) : path === rule.path)) return false;
  const names = rule.headerNames;
  for (let i = 0; i < names.length; i++) {
    if (headers[names[i] as string] !== rule.headerValues[i]) return false;
  }
  return true;
}
