/**
 * What Prometheus would refuse in the label matchers of `alerts.scrape_selector` (the rendered
 * `up{...}` of TokentapTargetDown), found before a rule file is written: an escape a PromQL string
 * does not take, or a regular expression Go's RE2 refuses. Checked here as far as JavaScript can
 * tell; the promtool test renders every spelling accepted here and promtool takes it.
 */

/**
 * One problem per matcher of `selector` (already of the matcher grammar), each ending in
 * "Prometheus would refuse the rule file"; none for a selector Prometheus takes.
 */
export function matcherProblems(selector: string): string[] {
  const problems: string[] = [];
  for (const [, name, operator, quoted] of selector.matchAll(MATCHER_PARTS)) {
    const stringProblem = promqlStringProblem(quoted as string);
    if (stringProblem !== undefined) {
      problems.push(`the value of ${name} ${stringProblem}: Prometheus would refuse the rule file`);
      continue;
    }
    const problem = operator === '=~' || operator === '!~' ? regexProblem(promqlStringValue(quoted as string)) : undefined;
    if (problem !== undefined) problems.push(`the regular expression of ${name} ${problem}: Prometheus would refuse the rule file`);
  }
  return problems;
}

/** One matcher of a selector of the grammar schema.ts checks: its label name, operator and double-quoted value, still escaped. */
const MATCHER_PARTS = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\\n]|\\.)*)"/g;

/** The escapes a PromQL double-quoted string takes (Go's): what may follow a backslash. */
const PROMQL_ESCAPE = /\\(?:[abfnrtv\\"]|[0-7]{3}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})/y;
const PROMQL_ESCAPED: Record<string, string> = { a: '\u0007', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', '"': '"' };

/** Why PromQL would refuse the escapes of a double-quoted string (as written between its quotes), or undefined. */
function promqlStringProblem(quoted: string): string | undefined {
  for (let i = quoted.indexOf('\\'); i !== -1; i = quoted.indexOf('\\', i)) {
    PROMQL_ESCAPE.lastIndex = i;
    if (!PROMQL_ESCAPE.test(quoted)) {
      const next = quoted[i + 1] ?? '';
      return `holds "\\${next}", which a PromQL string does not take (write "\\\\${next}" for the regular expression's \\${next})`;
    }
    i = PROMQL_ESCAPE.lastIndex;
  }
  return undefined;
}

/** The text of a double-quoted PromQL string whose escapes promqlStringProblem accepted. */
function promqlStringValue(quoted: string): string {
  return quoted.replace(/\\(?:([abfnrtv\\"])|([0-7]{3})|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))/g, (_all, simple: string | undefined, octal: string | undefined, hex2: string | undefined, hex4: string | undefined, hex8: string | undefined) =>
    simple !== undefined ? (PROMQL_ESCAPED[simple] as string) : String.fromCodePoint(Number.parseInt(octal ?? hex2 ?? hex4 ?? hex8 ?? '0', octal === undefined ? 16 : 8)),
  );
}

/** RE2's largest repeat count (`x{1000}`); Prometheus refuses more. */
const MAX_REPEAT = 1000;

/**
 * Why Prometheus (Go's RE2) would refuse `pattern`, as far as JavaScript can tell, or undefined:
 * it uses what RE2 lacks (lookaround, backreferences), repeats more than 1,000 times, or does not
 * compile. Escapes, character classes and `\Q...\E` are stepped over, so `\(?=` or `[(?=]` is not
 * taken for a lookaround.
 */
function regexProblem(pattern: string): string | undefined {
  for (let i = 0; i < pattern.length; ) {
    const c = pattern[i];
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      if (next === 'Q') {
        const end = pattern.indexOf('\\E', i + 2);
        i = end === -1 ? pattern.length : end + 2;
        continue;
      }
      if (next >= '1' && next <= '9') return "uses a backreference, which Prometheus's regular expressions (RE2) do not have";
      i += 2;
    } else if (c === '[') {
      i = classEnd(pattern, i);
    } else if (c === '(' && pattern[i + 1] === '?' && /^(?:[=!]|<[=!])/.test(pattern.slice(i + 2, i + 4))) {
      return "uses lookaround, which Prometheus's regular expressions (RE2) do not have";
    } else {
      const repeat = c === '{' ? /^\{(\d+)(?:,(\d*))?\}/.exec(pattern.slice(i)) : null;
      if (repeat !== null && Math.max(Number(repeat[1]), Number(repeat[2] || 0)) > MAX_REPEAT) return `repeats more than ${MAX_REPEAT} times, RE2's limit`;
      i++;
    }
  }
  // `\Q...\E` has no JavaScript spelling: such a pattern is not compiled here.
  if (pattern.includes('\\Q')) return undefined;
  try {
    // RE2 syntax JavaScript spells otherwise: `(?P<name>`, and flags such as `(?i)` or `(?i:...)`.
    new RegExp(pattern.replace(/\(\?P</g, '(?<').replace(/\(\?[imsU-]+\)/g, '').replace(/\(\?[imsU-]+:/g, '(?:'));
  } catch (error) {
    return `does not compile (${(error as Error).message})`;
  }
  return undefined;
}

/** The index just past the character class opening at `start` (`[...]`, `[^]...]`, `[[:alpha:]]`). */
function classEnd(pattern: string, start: number): number {
  let i = start + 1;
  if (pattern[i] === '^') i++;
  if (pattern[i] === ']') i++;
  while (i < pattern.length && pattern[i] !== ']') {
    if (pattern[i] === '\\') i += 2;
    else if (pattern.startsWith('[:', i)) {
      const close = pattern.indexOf(':]', i + 2);
      i = close === -1 ? i + 1 : close + 2;
    } else i++;
  }
  return i + 1;
}
