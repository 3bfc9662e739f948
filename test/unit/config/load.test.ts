import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../helpers/problems.js';
import { loadSettings } from '../../../src/config/load.js';
import { METRICS } from '../../../src/metrics/definitions.js';

const files = (map: Record<string, string>) => (path: string) => {
  const text = map[path];
  if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
  return text;
};


describe('settings', () => {
  it('uses the documented defaults with no flags, environment or file', () => {
    const s = loadSettings({ flags: {}, env: {} });
    expect(s.upstream.href).toBe('http://127.0.0.1:8000/');
    expect(s.listen).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(s.adminListen).toEqual({ host: '0.0.0.0', port: 9464 });
    expect(s.maxModels).toBe(32);
    expect(s.upstreamIdleTimeoutMs).toBe(300_000);
    expect(s.buckets.ttft).toEqual(METRICS.ttft.defaultBuckets);
    expect(Object.isFrozen(s)).toBe(true);
  });

  it('lets flags win over environment, and environment over the file', () => {
    const readFile = files({ 'c.yaml': 'upstream: http://127.0.0.1:1\nlisten: 127.0.0.1:1\nadmin_listen: 127.0.0.1:1\n' });
    const env = { TOKENTAP_UPSTREAM: 'http://127.0.0.1:2', TOKENTAP_LISTEN: '127.0.0.1:2', TOKENTAP_CONFIG: 'c.yaml' };
    const s = loadSettings({ flags: { upstream: 'http://127.0.0.1:3' }, env, readFile });
    expect(s.upstream.port).toBe('3');
    expect(s.listen.port).toBe(2);
    expect(s.adminListen.port).toBe(1);
    expect(s.configFile).toBe('c.yaml');
  });

  it('takes final_scrape_wait from the pod spec too: the flag over TOKENTAP_FINAL_SCRAPE_WAIT over the file', () => {
    const readFile = files({ 'c.yaml': 'final_scrape_wait: 5s\n' });
    expect(loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile }).finalScrapeWaitMs).toBe(5_000);
    expect(loadSettings({ flags: { config: 'c.yaml' }, env: { TOKENTAP_FINAL_SCRAPE_WAIT: '15s' }, readFile }).finalScrapeWaitMs).toBe(15_000);
    expect(loadSettings({ flags: { config: 'c.yaml', finalScrapeWait: '30s' }, env: { TOKENTAP_FINAL_SCRAPE_WAIT: '15s' }, readFile }).finalScrapeWaitMs).toBe(30_000);
    expect(problemsOf(() => loadSettings({ flags: {}, env: { TOKENTAP_FINAL_SCRAPE_WAIT: '15' } }))).toEqual([expect.stringMatching(/^TOKENTAP_FINAL_SCRAPE_WAIT: expected a .*duration/)]);
  });

  it('reads buckets, model limit and timeouts from the file', () => {
    const readFile = files({
      'c.yaml': 'metrics:\n  max_models: 4\n  buckets:\n    itl: [0.01, 0.05]\nupstream_idle_timeout: 90s\n',
    });
    const s = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile });
    expect(s.maxModels).toBe(4);
    expect(s.buckets.itlToken).toEqual([0.01, 0.05]);
    expect(s.buckets.itlChunk).toEqual([0.01, 0.05]);
    expect(s.upstreamIdleTimeoutMs).toBe(90_000);
  });

  it('reads admin_allowed_hosts (none by default) and refuses a name with a port or a scheme, naming the entry and what to write', () => {
    expect(loadSettings({ flags: {}, env: {} }).adminAllowedHosts).toEqual([]);
    const ok = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: files({ 'c.yaml': 'admin_allowed_hosts: [tokentap.example.com, .corp.example]\n' }) });
    expect(ok.adminAllowedHosts).toEqual(['tokentap.example.com', '.corp.example']);
    const problems = problemsOf(() => loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: files({ 'c.yaml': 'admin_allowed_hosts:\n  - tokentap.example.com:9464\n  - http://tokentap.example.com\n' }) }));
    expect(problems).toEqual([
      expect.stringMatching(/^c\.yaml:2: admin_allowed_hosts\[0\]: expected a host name without port, such as tokentap\.example\.com/),
      expect.stringMatching(/^c\.yaml:3: admin_allowed_hosts\[1\]: expected a host name without port/),
    ]);
  });

  it('reads upstream_retry_body_limit (64 KiB by default, 0 disables retries) and refuses a bad one, naming it', () => {
    expect(loadSettings({ flags: {}, env: {} }).upstreamRetryBodyLimitBytes).toBe(65_536);
    const ok = loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: files({ 'c.yaml': 'upstream_retry_body_limit: 0\n' }) });
    expect(ok.upstreamRetryBodyLimitBytes).toBe(0);
    const problems = problemsOf(() => loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: files({ 'c.yaml': 'upstream_retry_body_limit: 64KiB\n' }) }));
    expect(problems).toEqual([expect.stringMatching(/^c\.yaml:1: upstream_retry_body_limit: expected a number of bytes/)]);
    expect(problemsOf(() => loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: files({ 'c.yaml': 'upstream_retry_body_limit: -1\n' }) }))).toEqual([
      expect.stringMatching(/^c\.yaml:1: upstream_retry_body_limit: /),
    ]);
  });

  it('reports every problem at once, each with the file, line and path', () => {
    const readFile = files({
      'bad.yaml': ['upstream: ftp://x', 'listen: nonsense', 'metrics:', '  buckets:', '    ttft: [0.1, 0.05]', '  colour: red', ''].join('\n'),
    });
    const problems = problemsOf(() => loadSettings({ flags: { config: 'bad.yaml' }, env: {}, readFile }));
    expect(problems).toEqual([
      expect.stringMatching(/^bad\.yaml:1: upstream: only http:\/\/ upstreams/),
      expect.stringMatching(/^bad\.yaml:2: listen: expected HOST:PORT/),
      expect.stringMatching(/^bad\.yaml:5: metrics\.buckets\.ttft\[1\]: bucket boundaries must be strictly increasing/),
      'bad.yaml:6: metrics.colour: unknown setting',
    ]);
  });

  it('names the flag or variable a bad value came from', () => {
    expect(problemsOf(() => loadSettings({ flags: { listen: 'x' }, env: {} }))).toEqual([expect.stringMatching(/^--listen: expected HOST:PORT/)]);
    expect(problemsOf(() => loadSettings({ flags: {}, env: { TOKENTAP_ADMIN_LISTEN: ':99999' } }))).toEqual([
      expect.stringMatching(/^TOKENTAP_ADMIN_LISTEN: expected HOST:PORT/),
    ]);
  });

  it('reports YAML syntax errors and unreadable files with the file name', () => {
    expect(problemsOf(() => loadSettings({ flags: { config: 'x.yaml' }, env: {}, readFile: files({ 'x.yaml': 'a: [1,\n' }) }))[0]).toMatch(/^x\.yaml:\d+: YAML: /);
    expect(problemsOf(() => loadSettings({ flags: { config: 'missing.yaml' }, env: {}, readFile: files({}) }))[0]).toMatch(/^missing\.yaml: ENOENT/);
  });
});
