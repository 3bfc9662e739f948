import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startSimulator } from '../../src/simulator/index.js';
import { histogram, scrape } from '../helpers/prometheus-text.js';
import { eventually } from '../helpers/sidecar.js';

function memoryStream() {
  let text = '';
  return { stream: { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream, text: () => text };
}

describe('tokentap CLI', () => {
  it('refuses to serve with a bad config, naming the file, line, setting and problem', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-cli-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'listen: 127.0.0.1:0\nupstream_idle_timeout: soon\n');
    const err = memoryStream();
    const code = await main(['serve', '--config', file], { stdout: memoryStream().stream, stderr: err.stream, env: {}, stopped: Promise.resolve() });
    expect(code).toBe(1);
    expect(err.text()).toContain('TOKENTAP_ERR_CONFIG_INVALID');
    expect(err.text()).toContain(`${file}:2: upstream_idle_timeout: expected a positive duration like "200ms"`);
  });

  it('`check` prints every problem of a bad config as FILE:LINE: path: message and exits 1; `serve` refuses the same file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-check-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      ['workloads:', '  - name: chat', '    match: { header: { x-workload: chat } }', '    slo: { objective: 99, ttft: fast }', '  - name: chat', ''].join('\n'),
    );
    const expected = [
      `${file}:4: workloads[0].slo.objective: expected a ratio between 0 and 1, e.g. 0.99 (1 leaves no error budget)`,
      `${file}:4: workloads[0].slo.ttft: expected a positive duration like "200ms", "30s" or "5m", got "fast"`,
      `${file}:5: workloads[1].name: duplicate workload name "chat"`,
    ];
    const out = memoryStream();
    const err = memoryStream();
    expect(await main(['check', '--config', file], { stdout: out.stream, stderr: err.stream, env: {} })).toBe(1);
    expect(out.text()).toBe('');
    expect(err.text()).toBe(`${expected.join('\n')}\n${file}: invalid (3 problems)\n`);

    const serveErr = memoryStream();
    const code = await main(['serve', '--config', file], { stdout: memoryStream().stream, stderr: serveErr.stream, env: {}, stopped: Promise.resolve() });
    expect(code).toBe(1);
    for (const line of expected) expect(serveErr.text()).toContain(line);
  });

  it('`check` accepts the example config with a summary of its workloads and SLOs', async () => {
    const out = memoryStream();
    const err = memoryStream();
    expect(await main(['check', '--config', 'deploy/tokentap.yaml'], { stdout: out.stream, stderr: err.stream, env: {} })).toBe(0);
    // The example's links are the docs' placeholders: said, not refused.
    expect(err.text().trimEnd().split('\n').map((line) => line.replace(/ is the documentation's placeholder.*/, ''))).toEqual([
      'deploy/tokentap.yaml: warning: alerts.grafana_url: https://grafana.example.com',
      'deploy/tokentap.yaml: warning: alerts.runbook_base_url: https://github.com/ORG/tokentap/blob/main/docs/runbooks',
    ]);
    const lines = out.text().trimEnd().split('\n');
    expect(lines[0]).toBe('deploy/tokentap.yaml: valid; 5 workloads (first match wins), 4 with SLOs');
    expect(lines).toContain('  chat           x-workload: chat or path /v1/chat/completions; SLO 99%: ttft <= 200ms, itl <= 50ms');
    expect(lines).toContain('  rag            x-workload: rag; SLO 99%: ttft <= 300ms, itl <= 100ms, e2e <= 3s');
    expect(lines.at(-1)).toBe('  default        every request; no SLO');
  });

  it('`check` prints each objective and threshold as the file gives it, however many digits (an objective below 1 never as 100%)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-check-'));
    const file = join(dir, 'digits.yaml');
    writeFileSync(file, 'workloads:\n  - name: strict\n    match: { path: /a }\n    slo: { objective: 0.9999995, ttft: 0.0005ms, itl: 4.2ms, e2e: 1.1h }\n  - name: default\n');
    const out = memoryStream();
    expect(await main(['check', '--config', file, '--serve-only'], { stdout: out.stream, stderr: memoryStream().stream, env: {} })).toBe(0);
    expect(out.text().split('\n')[1]).toBe('  strict   path /a; SLO 99.99995%: ttft <= 0.0005ms, itl <= 4.2ms, e2e <= 3960s');
  });

  it('`check` warns when an objective makes a burn-rate condition unreachable, and still accepts the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-check-'));
    const file = join(dir, 'low.yaml');
    writeFileSync(file, 'workloads:\n  - name: batch\n    match: { path: /v1/completions }\n    slo: { objective: 0.9, ttft: 2s }\n  - name: default\n');
    const err = memoryStream();
    // --serve-only: the file has no alerts section, which only render needs.
    expect(await main(['check', '--config', file, '--serve-only'], { stdout: memoryStream().stream, stderr: err.stream, env: {} })).toBe(0);
    expect(err.text().trimEnd().split('\n')).toEqual([
      `${file}: warning: workload "batch": objective 0.9 makes the page condition "1h and 5m above 14.4x the budget" unreachable (it needs more than 144 % bad events)`,
    ]);
  });

  it('`check` prints no credential a workload matches on, and nothing from the file that could drive the terminal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-check-'));
    const file = join(dir, 'teams.yaml');
    writeFileSync(
      file,
      [
        'workloads:',
        '  - name: team-a',
        '    match: { header: { authorization: "Bearer sk-TEAM-A-SECRET", x-team: a } }',
        '  - name: team-b',
        '    match: { header: { x-api-key: XAPIKEY-SECRET }, model: "llama\\u001b]0;pwned\\u0007" }',
        '  - name: team-c',
        '    match: [{ header: { x-authentication: AUTHN-SECRET } }, { header: { x-access-key: AKIA-SECRET } }, { header: { x-credential: CRED-SECRET } }]',
        '  - name: default',
        '',
      ].join('\n'),
    );
    const out = memoryStream();
    expect(await main(['check', '--config', file, '--serve-only'], { stdout: out.stream, stderr: memoryStream().stream, env: {} })).toBe(0);
    expect(out.text()).not.toContain('SECRET');
    expect(out.text()).not.toMatch(/[\u001b\u0007]/);
    expect(out.text().split('\n').slice(1, 4)).toEqual([
      '  team-a   authorization: (value hidden) and x-team: a; no SLO',
      '  team-b   x-api-key: (value hidden) and model llama?]0;pwned?; no SLO',
      '  team-c   x-authentication: (value hidden) or x-access-key: (value hidden) or x-credential: (value hidden); no SLO',
    ]);
  });

  it('`render` gives the same warnings: an objective of 0.8 has no reachable page condition left', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokentap-render-'));
    const file = join(dir, 'lax.yaml');
    writeFileSync(
      file,
      'workloads:\n  - name: lax\n    slo: { objective: 0.8, e2e: 30s }\nalerts:\n  grafana_url: https://grafana.corp.internal\n  runbook_base_url: https://git.corp.internal/runbooks\n',
    );
    const err = memoryStream();
    expect(await main(['render', '--config', file, '--out', join(dir, 'out')], { stdout: memoryStream().stream, stderr: err.stream, env: {} })).toBe(0);
    expect(err.text().trimEnd().split('\n')).toEqual([
      `${file}: warning: workload "lax": objective 0.8 makes the page condition "1h and 5m above 14.4x the budget" unreachable (it needs more than 288 % bad events)`,
      `${file}: warning: workload "lax": objective 0.8 makes the page condition "6h and 30m above 6x the budget" unreachable (it needs more than 120 % bad events)`,
    ]);
  });

  it('`check` without --config, or with a missing file, says so', async () => {
    const err = memoryStream();
    expect(await main(['check'], { stdout: memoryStream().stream, stderr: err.stream, env: {} })).toBe(2);
    expect(err.text()).toContain('check needs --config FILE');
    const missing = memoryStream();
    expect(await main(['check', '--config', '/nonexistent/tokentap.yaml'], { stdout: memoryStream().stream, stderr: missing.stream, env: {} })).toBe(1);
    expect(missing.text()).toMatch(/^\/nonexistent\/tokentap\.yaml: ENOENT/);
  });

  it('rejects an unknown command and an unknown flag with usage exit code 2', async () => {
    const io = () => ({ stdout: memoryStream().stream, stderr: memoryStream().stream, env: {}, stopped: Promise.resolve() });
    expect(await main(['serf'], io())).toBe(2);
    const err = memoryStream();
    expect(await main(['serve', '--upstraem', 'x'], { ...io(), stderr: err.stream })).toBe(2);
    expect(err.text()).toMatch(/--upstraem/);
  });

  it('runs `tokentap serve` from the bin in front of the simulator and shows TTFT and ITL after one stream', async () => {
    const simulator = await startSimulator({ port: 0, ttftMs: 30, itlMs: 5, outputTokens: 8 });
    const child = spawn(process.execPath, ['bin/tokentap.js', 'serve', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
      env: { ...process.env, TOKENTAP_UPSTREAM: simulator.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      const started = await eventually('serving line', () => out.split('\n').find((l) => l.includes('tokentap serving')), (l) => l !== undefined, 15_000);
      const { proxy, admin, upstream } = JSON.parse(started!) as { proxy: string; admin: string; upstream: string };
      expect(upstream).toBe(`${simulator.url}/`);
      const response = await fetch(`${proxy}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(await response.text()).toContain('data: [DONE]');
      const m = await eventually('histograms', () => scrape(admin), (x) => histogram(x, 'gen_ai_server_time_to_first_token_seconds').count === 1);
      expect(histogram(m, 'tokentap_inter_token_latency_seconds').count).toBe(7);
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await simulator.close();
    }
  });
});
