import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { defaultMaxConnections, LIMIT_DEFAULTS, processFdLimit, RESERVED_FDS } from '../../../src/proxy/relay-limits.js';
import { problemsOf } from '../../helpers/problems.js';

const withFile = (yaml: string) => loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => yaml });

describe('limits: settings', () => {
  it('defaults every limit, the connection limit from the file-descriptor limit, and one client may hold all of it', () => {
    const { limits } = loadSettings({ flags: {}, env: {} });
    const maxConnections = defaultMaxConnections(processFdLimit());
    expect(limits).toEqual({ maxConnections, maxConnectionsPerClient: maxConnections, ...LIMIT_DEFAULTS });
    expect(LIMIT_DEFAULTS.heldBodyBytes).toBe(64 << 20);
    expect(Object.isFrozen(limits)).toBe(true);
  });

  it('derives the connection limit from ulimit -n, keeping descriptors in reserve', () => {
    expect(RESERVED_FDS).toBe(128);
    expect(defaultMaxConnections(1024)).toBe(448);
    expect(defaultMaxConnections(256)).toBe(64);
    expect(defaultMaxConnections(100)).toBe(16);
    expect(defaultMaxConnections(1_048_576)).toBe(4096);
  });

  it('reads every key', () => {
    const { limits } = withFile(
      [
        'limits:',
        '  max_connections: 10',
        '  max_connections_per_client: 6',
        '  request_head_timeout: 2s',
        '  request_body_idle_timeout: 500ms',
        '  response_send_timeout: 1500ms',
        '  sniffed_body_bytes: 1000',
        '  rewritten_body_bytes: 2000',
        '  held_body_bytes: 3000',
        '  pipelined_requests: 2',
        '  min_request_chunk_bytes: 8',
        '  interim_responses: 3',
        '  interim_response_bytes: 4000',
        '  log_buffer_bytes: 5000',
        '  h2_max_concurrent_streams: 16',
        '  h2_max_header_list_bytes: 6000',
        '  h2_stream_window_bytes: 70000',
        '  h2_client_resets_per_second: 7',
      ].join('\n'),
    );
    expect(limits).toEqual({
      maxConnections: 10,
      maxConnectionsPerClient: 6,
      requestHeadTimeoutMs: 2000,
      requestBodyIdleTimeoutMs: 500,
      responseSendTimeoutMs: 1500,
      sniffedBodyBytes: 1000,
      rewrittenBodyBytes: 2000,
      heldBodyBytes: 3000,
      pipelinedRequests: 2,
      minRequestChunkBytes: 8,
      interimResponses: 3,
      interimResponseBytes: 4000,
      logBufferBytes: 5000,
      h2MaxConcurrentStreams: 16,
      h2MaxHeaderListBytes: 6000,
      h2StreamWindowBytes: 70000,
      h2ClientResetsPerSecond: 7,
    });
  });

  it('keeps max_connections_per_client at max_connections when only max_connections is set', () => {
    expect(withFile('limits:\n  max_connections: 12\n').limits.maxConnectionsPerClient).toBe(12);
  });

  it('loads the example of docs/limits.md as the page shows it, every limit key in it', () => {
    const page = readFileSync('docs/limits.md', 'utf8');
    const example = /```yaml\n(limits:\n[\s\S]*?)```/.exec(page)?.[1];
    expect(example).toBeDefined();
    const { limits } = withFile(example as string);
    expect(limits.maxConnections).toBe(2000);
    expect(limits.maxConnectionsPerClient).toBe(2000);
    expect(Object.keys(limits).length).toBe((example as string).split('\n').filter((line) => /^ {2}[a-z0-9_]+:/.test(line)).length);
  });

  it('names the file, line and key of a bad limit', () => {
    expect(problemsOf(() => withFile('limits:\n  max_connections: 0\n  request_body_idle_timeout: soon\n  pipelined_requests: 1.5\n  nonsense: 1\n'))).toEqual([
      'c.yaml:2: limits.max_connections: expected a whole number of at least 1',
      'c.yaml:3: limits.request_body_idle_timeout: expected a positive duration like "200ms", "30s" or "5m", got "soon"',
      'c.yaml:4: limits.pipelined_requests: expected a whole number of at least 1',
      'c.yaml:5: limits.nonsense: unknown setting',
    ]);
  });
});
