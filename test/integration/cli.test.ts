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
