import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../helpers/problems.js';
import { loadSettings, withBoundary } from '../../../src/config/load.js';
import { parseDurationMs } from '../../../src/config/duration.js';
import { METRICS } from '../../../src/metrics/definitions.js';

const load = (yaml: string) => loadSettings({ flags: { config: 'w.yaml' }, env: {}, readFile: () => yaml });

const refusals = (yaml: string): readonly string[] => problemsOf(() => load(yaml));

describe('workloads in the config', () => {
  it('normalises match rules (lower-case header names) and thresholds to seconds', () => {
    const s = load(`
workloads:
  - name: chat
    match: { header: { X-Workload: chat }, path: /v1/chat/completions, model: llama }
    slo: { objective: 0.99, ttft: 200ms, itl: 50ms, e2e: 1.5m }
  - name: default
`);
    expect(s.workloads).toEqual([
      {
        name: 'chat',
        match: [{ headers: [['x-workload', 'chat']], path: '/v1/chat/completions', model: 'llama' }],
        slo: { objective: 0.99, thresholdsS: { ttft: 0.2, itl: 0.05, e2e: 90 }, ttftOn: 'first_token', itlPercentile: 0.99 },
      },
      { name: 'default', match: undefined, slo: undefined },
    ]);
    expect(Object.isFrozen(s.workloads[0]!.slo!.thresholdsS)).toBe(true);
  });

  it('reads ttft_on and itl_percentile', () => {
    const s = load('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 2s, itl: 50ms, ttft_on: first_answer, itl_percentile: 0.9 }\n');
    expect(s.workloads[0]!.slo).toMatchObject({ ttftOn: 'first_answer', itlPercentile: 0.9 });
  });

  it('inserts a TTFT threshold into the first-answer histogram too', () => {
    const s = load('workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 1.7s, ttft_on: first_answer }\n');
    expect(s.buckets.ttftAnswer).toContain(1.7);
    expect(s.buckets.ttft).toContain(1.7);
  });

  it('reads a list of match alternatives', () => {
    const s = load('workloads:\n  - name: chat\n    match:\n      - header: { x-workload: chat }\n      - path: /v1/chat/*\n  - name: default\n');
    expect(s.workloads[0]!.match).toEqual([
      { headers: [['x-workload', 'chat']], path: undefined, model: undefined },
      { headers: [], path: '/v1/chat/*', model: undefined },
    ]);
  });

  it('is one workload "default" without SLOs when none is configured', () => {
    expect(loadSettings({ flags: {}, env: {} }).workloads).toEqual([{ name: 'default', match: undefined, slo: undefined }]);
  });
});

describe('SLO thresholds as exact bucket boundaries', () => {
  it('inserts each threshold into its histograms in order, once, leaving existing boundaries alone', () => {
    const s = load(`
workloads:
  - name: a
    match: { path: /a }
    slo: { objective: 0.99, ttft: 160ms, itl: 33ms, e2e: 3s }
  - name: b
    match: { path: /b }
    slo: { objective: 0.9, ttft: 160ms, e2e: 7s }
  - name: c
    slo: { objective: 0.9, ttft: 100s }
`);
    const added = (key: keyof typeof s.buckets) => s.buckets[key].filter((b) => !(METRICS[key].defaultBuckets as readonly number[]).includes(b));
    expect(added('ttft')).toEqual([0.16, 100]);
    expect(added('itlToken')).toEqual([0.033]);
    expect(added('itlChunk')).toEqual([0.033]);
    expect(added('e2e')).toEqual([7]); // 3 s is a default boundary already
    expect(added('ttfb')).toEqual([]);
    expect(added('tpot')).toEqual([]);
    for (const key of ['ttft', 'itlToken', 'e2e'] as const) {
      const list = s.buckets[key];
      expect(list.every((b, i) => i === 0 || b > list[i - 1]!), key).toBe(true);
      expect(Object.isFrozen(list)).toBe(true);
    }
  });

  it('keeps a threshold the decimal the file writes, in any unit, so le and the rules say what the file says', () => {
    // 4.2 / 1000 is 0.004200000000000001 and 4.1 * 60 is 245.99999999999997 in floating point: such
    // a boundary was exposed as le="245.99999999999997" while the rules matched le=~"246".
    const s = load(`
workloads:
  - name: a
    slo: { objective: 0.99, ttft: 1.1h, itl: 4.2ms, e2e: 4.1m }
`);
    expect(s.workloads[0]!.slo!.thresholdsS).toEqual({ ttft: 3960, itl: 0.0042, e2e: 246 });
    expect(s.buckets.ttft).toContain(3960);
    expect(s.buckets.itlToken).toContain(0.0042);
    expect(s.buckets.e2e).toContain(246);
    expect(parseDurationMs('4.1m')).toBe(246_000);
    expect(parseDurationMs('0.07h')).toBe(252_000);
    for (const [text, seconds] of [['1.15s', 1.15], ['2.1ms', 0.0021], ['8.3m', 498], ['0.29h', 1044], ['1.005s', 1.005]] as const) {
      expect(load(`workloads:\n  - name: a\n    slo: { objective: 0.99, e2e: ${text} }\n`).workloads[0]!.slo!.thresholdsS.e2e, text).toBe(seconds);
    }
  });

  it('inserts thresholds into configured bucket lists too', () => {
    const s = load(`
metrics: { buckets: { ttft: [0.5, 1], itl: [0.01] } }
workloads:
  - name: a
    slo: { objective: 0.99, ttft: 200ms, itl: 50ms }
`);
    expect(s.buckets.ttft).toEqual([0.2, 0.5, 1]);
    expect(s.buckets.itlToken).toEqual([0.01, 0.05]);
  });

  it('withBoundary inserts at the start, middle and end, and not twice', () => {
    expect(withBoundary([1, 2], 0.5)).toEqual([0.5, 1, 2]);
    expect(withBoundary([1, 2], 1.5)).toEqual([1, 1.5, 2]);
    expect(withBoundary([1, 2], 3)).toEqual([1, 2, 3]);
    expect(withBoundary([1, 2], 2)).toEqual([1, 2]);
  });
});

describe('broken workload configs, each refused with the exact message', () => {
  const cases: ReadonlyArray<readonly [what: string, yaml: string, problems: readonly string[]]> = [
    [
      'a duplicate name',
      'workloads:\n  - name: chat\n    match: { path: /a }\n  - name: chat\n',
      ['w.yaml:4: workloads[1].name: duplicate workload name "chat"'],
    ],
    [
      'a catch-all before the end',
      'workloads:\n  - name: everything\n  - name: chat\n    match: { path: /a }\n',
      ['w.yaml:2: workloads[0]: workload "everything" has no match rules, so it takes every request and the workloads after it are never used; put it last'],
    ],
    [
      'a name that cannot be a label value',
      'workloads:\n  - name: Chat Bot\n',
      ['w.yaml:2: workloads[0].name: expected a name of lower-case letters, digits, "_" or "-", starting with a letter (it becomes a label value)'],
    ],
    [
      'a threshold that is not a duration',
      'workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n      ttft: fast\n',
      ['w.yaml:5: workloads[0].slo.ttft: expected a positive duration like "200ms", "30s" or "5m", got "fast"'],
    ],
    [
      'a zero threshold',
      'workloads:\n  - name: chat\n    slo: { objective: 0.99, itl: 0ms }\n',
      ['w.yaml:3: workloads[0].slo.itl: expected a positive duration like "200ms", "30s" or "5m", got "0ms"'],
    ],
    [
      'an objective of 1 (no error budget)',
      'workloads:\n  - name: chat\n    slo: { objective: 1, ttft: 200ms }\n',
      ['w.yaml:3: workloads[0].slo.objective: expected a ratio between 0 and 1, e.g. 0.99 (1 leaves no error budget)'],
    ],
    [
      'an objective given as a percentage',
      'workloads:\n  - name: chat\n    slo: { objective: 99, ttft: 200ms }\n',
      ['w.yaml:3: workloads[0].slo.objective: expected a ratio between 0 and 1, e.g. 0.99 (1 leaves no error budget)'],
    ],
    [
      'an SLO without any threshold',
      'workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n',
      ['w.yaml:4: workloads[0].slo: expected at least one threshold: ttft, itl or e2e'],
    ],
    [
      'a misspelt match key and SLO key',
      'workloads:\n  - name: chat\n    match:\n      headers: { x-workload: chat }\n    slo: { objective: 0.9, tftt: 200ms }\n',
      [
        'w.yaml:4: workloads[0].match.headers: unknown setting; did you mean "header"?',
        'w.yaml:4: workloads[0].match: expected at least one condition: header, path or model (leave out `match` for a catch-all)',
        'w.yaml:5: workloads[0].slo.tftt: unknown setting; did you mean "ttft"?',
        'w.yaml:5: workloads[0].slo: expected at least one threshold: ttft, itl or e2e',
      ],
    ],
    [
      'a misspelt condition in a list of alternatives',
      'workloads:\n  - name: chat\n    match:\n      - path: /v1/chat/completions\n      - models: m\n',
      ['w.yaml:5: workloads[0].match[1].models: unknown setting; did you mean "model"?', 'w.yaml:5: workloads[0].match[1]: expected at least one condition: header, path or model (leave out `match` for a catch-all)'],
    ],
    [
      'a path without the leading slash',
      'workloads:\n  - name: chat\n    match: { path: v1/chat/completions }\n',
      ['w.yaml:3: workloads[0].match.path: expected a path starting with "/"'],
    ],
    [
      'a header name with a space',
      'workloads:\n  - name: chat\n    match:\n      header: { "x workload": chat }\n',
      ['w.yaml:4: workloads[0].match.header.x workload: expected an HTTP header name'],
    ],
    [
      'a header value with a control character (no request can carry it)',
      'workloads:\n  - name: chat\n    match:\n      header: { x-workload: "chat\\u001b[2J" }\n',
      ['w.yaml:4: workloads[0].match.header.x-workload: expected a header value without control characters (no request can carry one, so it would never match)'],
    ],
    [
      'an empty match mapping (which would match everything)',
      'workloads:\n  - name: chat\n    match: {}\n  - name: default\n',
      ['w.yaml:3: workloads[0].match: expected at least one condition: header, path or model (leave out `match` for a catch-all)'],
    ],
    [
      'an empty list of match alternatives',
      'workloads:\n  - name: chat\n    match: []\n',
      ['w.yaml:3: workloads[0].match: expected at least one set of match conditions'],
    ],
    [
      'a bad condition inside a list of alternatives',
      'workloads:\n  - name: chat\n    match:\n      - header: { x-workload: chat }\n      - path: chat\n',
      ['w.yaml:5: workloads[0].match[1].path: expected a path starting with "/"'],
    ],
    [
      'a match that is neither a mapping nor a list',
      'workloads:\n  - name: chat\n    match: /v1/chat/completions\n',
      ['w.yaml:3: workloads[0].match: expected a mapping of match conditions (header, path, model), or a list of such mappings'],
    ],
    [
      'a "*" inside a path',
      'workloads:\n  - name: chat\n    match: { path: /v1/*/completions }\n',
      ['w.yaml:3: workloads[0].match.path: expected "*" only at the end (a prefix match such as /v1/*)'],
    ],
    [
      'a ttft_on that names no token',
      'workloads:\n  - name: chat\n    slo: { objective: 0.99, ttft: 1s, ttft_on: answer }\n',
      ['w.yaml:3: workloads[0].slo.ttft_on: expected "first_token" or "first_answer"'],
    ],
    [
      'an itl_percentile above 1',
      'workloads:\n  - name: chat\n    slo: { objective: 0.99, itl: 50ms, itl_percentile: 99 }\n',
      ['w.yaml:3: workloads[0].slo.itl_percentile: expected a ratio above 0 and at most 1, e.g. 0.99'],
    ],
    [
      'an empty workload list',
      'workloads: []\n',
      ['w.yaml:1: workloads: expected at least one workload'],
    ],
    [
      'a workload without a name',
      'workloads:\n  - match: { path: /a }\n',
      ['w.yaml:2: workloads[0].name: expected a workload name, e.g. "chat"'],
    ],
    [
      'a header value that YAML reads as a number',
      'workloads:\n  - name: chat\n    match:\n      header: { x-tier: 1 }\n',
      ['w.yaml:4: workloads[0].match.header.x-tier: expected the header value as a string (quote numbers and booleans)'],
    ],
    [
      'an SLO without its objective',
      'workloads:\n  - name: chat\n    slo: { ttft: 200ms }\n',
      ['w.yaml:3: workloads[0].slo.objective: required: the share of events that must be good, a ratio between 0 and 1 such as 0.99'],
    ],
    [
      'an objective written as a percentage string',
      'workloads:\n  - name: chat\n    slo: { objective: "99%", ttft: 200ms }\n',
      ['w.yaml:3: workloads[0].slo.objective: expected a ratio between 0 and 1, e.g. 0.99 (99 % is 0.99), got "99%"'],
    ],
    [
      'an SLO that is not a mapping',
      'workloads:\n  - name: chat\n    slo: 0.99\n',
      ['w.yaml:3: workloads[0].slo: expected a mapping such as { objective: 0.99, ttft: 200ms }'],
    ],
    [
      'a model that YAML reads as a number, and an empty one',
      'workloads:\n  - name: a\n    match: { model: 1.5 }\n  - name: b\n    match: { model: "" }\n',
      [
        'w.yaml:3: workloads[0].match.model: expected the model name as the request body gives it, a string (quote numbers)',
        'w.yaml:5: workloads[1].match.model: expected the model name as the request body gives it, a string (quote numbers)',
      ],
    ],
    [
      'a header condition that is not a mapping, and a path that is not a string',
      'workloads:\n  - name: chat\n    match: { header: x-workload=chat, path: 5 }\n',
      [
        'w.yaml:3: workloads[0].match.header: expected a mapping of header names to values, e.g. { x-workload: chat }',
        'w.yaml:3: workloads[0].match.path: expected a path such as /v1/chat/completions',
      ],
    ],
    [
      'one header named twice in different case (one request header cannot hold both values)',
      'workloads:\n  - name: chat\n    match:\n      header: { X-Workload: chat, x-workload: rag }\n',
      ['w.yaml:4: workloads[0].match.header.x-workload: the same header as X-Workload (header names are case-insensitive): a request carries one value, so the two conditions never both hold; keep one'],
    ],
    [
      'a path with a query string (requests are matched on their path without it)',
      'workloads:\n  - name: chat\n    match: { path: "/openai/deployments/gpt/chat/completions?api-version=2024-06-01" }\n',
      ['w.yaml:3: workloads[0].match.path: expected a path without a query string ("?api-version=2024-06-01"): requests are matched on their path alone, so this would never match'],
    ],
    [
      'a header value with a character beyond Latin-1 (a request header is read one byte per character)',
      'workloads:\n  - name: chat\n    match:\n      header: { x-team: "日本" }\n',
      ['w.yaml:4: workloads[0].match.header.x-team: expected a header value of ASCII characters: a request\'s header is read one byte per character, so "日" (several bytes in UTF-8) would never match'],
    ],
    [
      'a header value with a leading or trailing space (HTTP drops it)',
      'workloads:\n  - name: chat\n    match:\n      header: { x-workload: "chat " }\n',
      ['w.yaml:4: workloads[0].match.header.x-workload: expected a header value without leading or trailing spaces or tabs (HTTP strips them from every request, so it would never match)'],
    ],
    [
      'a workload after a broader prefix path (it would never get a request)',
      'workloads:\n  - name: any-v1\n    match: { path: /v1/* }\n  - name: chat\n    match: { path: /v1/chat/completions }\n  - name: default\n',
      ['w.yaml:5: workloads[1].match: never decides: workload "any-v1" (workloads[0]) comes first and takes every request this matches; put "chat" before "any-v1", or narrow "any-v1"'],
    ],
    [
      'a workload whose headers include an earlier workload\'s (the earlier one takes its requests)',
      'workloads:\n  - name: chat\n    match: { header: { x-workload: chat } }\n  - name: chat-fast\n    match: { header: { X-Workload: chat, x-tier: fast }, model: m }\n',
      ['w.yaml:5: workloads[1].match: never decides: workload "chat" (workloads[0]) comes first and takes every request this matches; put "chat-fast" before "chat", or narrow "chat"'],
    ],
    [
      'one alternative of a list that an earlier workload takes (the others still match)',
      'workloads:\n  - name: chat\n    match: { path: /v1/chat/* }\n  - name: rag\n    match:\n      - header: { x-workload: rag }\n      - path: /v1/chat/completions\n      - path: /v1/chat/*\n  - name: default\n',
      [
        'w.yaml:7: workloads[1].match[1]: never decides: workload "chat" (workloads[0]) comes first and takes every request this matches; put "rag" before "chat", or narrow "chat"',
        'w.yaml:8: workloads[1].match[2]: never decides: workload "chat" (workloads[0]) comes first and takes every request this matches; put "rag" before "chat", or narrow "chat"',
      ],
    ],
  ];

  it.each(cases)('%s', (_what, yaml, expected) => {
    expect(refusals(yaml)).toEqual(expected);
  });

  it('accepts workloads that overlap without one containing the other: order decides only the overlap', () => {
    const s = load(`
workloads:
  - name: rag
    match: { header: { x-workload: rag } }
  - name: code
    match: { model: coder }
  - name: chat
    match:
      - header: { x-workload: chat }
      - path: /v1/chat/completions
  - name: v1-rag
    match: { path: /v1/*, model: rag-model }
  - name: v1
    match: { path: /v1/* }
`);
    expect(s.workloads.map((w) => w.name)).toEqual(['rag', 'code', 'chat', 'v1-rag', 'v1']);
  });
});
