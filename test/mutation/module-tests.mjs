// The test files that exercise each module, for `npm run mutate` (test/mutation/mutate.mjs).
// vitest's `related` cannot pick them: every relay test imports src/sidecar.ts, which imports every
// module, so "related" would run nearly the whole suite for each mutant. A module not listed here
// needs `--tests <glob>` on the command line (and an entry here once its tests are known).
// Tests that start the built CLI (dist/, e.g. test/security/secrets.test.ts, test/security/limits)
// never run a mutant (Stryker mutates src/) and refuse to start in Stryker's sandbox copy, where
// src/ looks newer than dist/: keep them out of these lists.

/**
 * The tests that run the OpenAI SSE tap on a stream (route-table.test.ts only selects it). Not
 * test/unit/taps/every-cut-replay.test.ts: it replays each capture once per byte (2-35 s per capture),
 * and each mutant the replays reach would run them all; the tests here cut the captures at random.
 */
const OPENAI_SSE_TAP_TESTS = [
  'test/unit/taps/openai-sse.test.ts',
  'test/unit/taps/first-token.test.ts',
  'test/unit/taps/first-answer-token.test.ts',
  'test/unit/taps/plain-content-event.test.ts',
  'test/unit/taps/token-count-mismatch.test.ts',
  'test/unit/taps/upstream-numbers.test.ts',
  'test/unit/taps/vllm-captures.test.ts',
];

/** The tests that run the other protocols' taps on a body (the engine-timings tests through RequestMonitor). */
const PROTOCOL_TAP_TESTS = [
  'test/unit/taps/hostile-events.test.ts',
  'test/unit/taps/protocol-fixtures.test.ts',
  'test/unit/taps/first-token.test.ts',
  'test/unit/taps/first-answer-token.test.ts',
  'test/unit/taps/openai-json.test.ts',
  'test/unit/proxy/engine-timings.test.ts',
];

/** @type {Record<string, string[]>} */
export const moduleTests = {
  'src/proxy/http1/chunked-body.ts': [
    'test/unit/proxy/chunked-body.test.ts',
    'test/security/chunked-crlf-desync.test.ts',
    'test/security/hostile-upstream.test.ts',
    'test/security/no-duplicate-generation.test.ts',
    'test/security/response-desync.test.ts',
    'test/security/review-bodiless-answer-body.test.ts',
    'test/security/review-chunked-bare-lf.test.ts',
    'test/security/review-usage-injection-hostile-body.test.ts',
    'test/integration/relay-http.test.ts',
  ],
  'src/proxy/hop-by-hop.ts': [
    'test/unit/proxy/request-rules.test.ts',
    'test/unit/proxy/usage-injection.test.ts',
    'test/security/hop-by-hop-headers.test.ts',
    'test/security/request-smuggling.test.ts',
    'test/security/response-desync.test.ts',
    'test/integration/relay-http.test.ts',
    'test/integration/usage-injection.test.ts',
  ],
  'src/proxy/http1/response-head.ts': [
    'test/unit/proxy/response-head.test.ts',
    'test/security/response-desync.test.ts',
    'test/security/hostile-upstream.test.ts',
    'test/security/review-bodiless-answer-body.test.ts',
    'test/security/chunked-crlf-desync.test.ts',
    'test/integration/relay-http.test.ts',
  ],
  'src/taps/ndjson-decoder.ts': ['test/unit/taps/ndjson-decoder.test.ts'],
  'src/admin/admin-host.ts': ['test/unit/admin/admin-host.test.ts'],
  'src/taps/sse-decoder.ts': ['test/unit/taps/sse-decoder.test.ts'],
  'src/taps/grpc/grpc-frame-decoder.ts': ['test/unit/taps/grpc/*.test.ts'],
  'src/taps/grpc/grpc-status.ts': ['test/unit/proxy/grpc-outcomes.test.ts', 'test/unit/taps/grpc/*.test.ts'],
  'src/taps/grpc/grpc-message-tap.ts': ['test/unit/proxy/grpc-outcomes.test.ts', 'test/unit/taps/grpc/*.test.ts'],
  'src/taps/grpc/generate-stream-tap.ts': ['test/unit/taps/grpc/*.test.ts', 'test/unit/proxy/grpc-outcomes.test.ts'],
  'src/taps/triton-grpc.ts': ['test/unit/taps/grpc/*.test.ts'],
  'src/taps/grpc/request-model.ts': ['test/unit/taps/grpc/triton-grpc.test.ts'],
  'src/taps/grpc/grpc-content-type.ts': ['test/unit/proxy/grpc-outcomes.test.ts'],
  'src/taps/openai-sse.ts': OPENAI_SSE_TAP_TESTS,
  ...Object.fromEntries(
    ['anthropic-sse', 'openai-responses-sse', 'tgi-sse', 'llamacpp-sse', 'triton-sse', 'ollama-ndjson', 'openai-json'].map((name) => [
      `src/taps/${name}.ts`,
      PROTOCOL_TAP_TESTS,
    ]),
  ),
  // Shared by the taps: the tests of every tap.
  ...Object.fromEntries(
    ['sse-event-tap', 'event-json', 'bounded-body', 'server-timings', 'upstream-numbers', 'plain-content-event'].map((name) => [
      `src/taps/${name}.ts`,
      [...new Set([...OPENAI_SSE_TAP_TESTS, ...PROTOCOL_TAP_TESTS])],
    ]),
  ),
  'src/slo/slo-events.ts': ['test/unit/slo/*.test.ts'],
  'src/clock/token-timeline.ts': [
    'test/unit/clock/*.test.ts',
    ...OPENAI_SSE_TAP_TESTS,
    'test/unit/taps/openai-json.test.ts',
    'test/unit/taps/protocol-fixtures.test.ts',
  ],
  'src/metrics/processor-sharing.ts': ['test/unit/metrics/accelerator-time.test.ts'],
  // The rule renderers, without the committed-files comparison (committed-artefacts.test.ts): it fails
  // on any change to the rendered text but passes again once the files are re-rendered, so the score
  // shows what the rules' own tests pin (and dashboards.test.ts, which is about the dashboards).
  ...Object.fromEntries(
    ['burn-rate-windows', 'burn-rate-alerts', 'recording-rules', 'p99-ttft-alert', 'traffic-guard'].map((name) => [
      `src/render/${name}.ts`,
      [
        'test/unit/render/rules.test.ts',
        'test/unit/render/burn-rate-semantics.test.ts',
        'test/unit/render/native-rules.test.ts',
        'test/unit/render/alert-settings.test.ts',
        'test/unit/render/runbooks.test.ts',
      ],
    ]),
  ),
};
