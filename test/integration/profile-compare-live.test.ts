import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * `tokentap profile compare` against a live sidecar (simulator upstream) and the real GuideLLM
 * report of test/fixtures/benchmarks/guidellm/ (fixed 256-token prompts, 128-token answers: 257.1
 * and 128 tokens mean). One workload sends production traffic shaped like that benchmark's, the
 * other prompts eight times as long: the comparison passes the first and flags the second.
 */
const GUIDELLM_JSON = join(import.meta.dirname, '..', 'fixtures', 'benchmarks', 'guidellm', 'benchmarks_stripped.json');
const CONFIG = `workloads:
  - name: like-bench
    match: { header: { x-workload: like-bench } }
  - name: long-prompts
    match: { header: { x-workload: long-prompts } }
  - name: default
`;

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

/** `tokens` prompt tokens as the simulator counts them (a token per 4 bytes of message text), streamed, with usage. */
async function send(workload: string, tokens: number): Promise<void> {
  const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-workload': workload },
    body: JSON.stringify({ model: 'm', max_tokens: 128, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'w'.repeat(tokens * 4) }] }),
  });
  await response.text();
}

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 1, itlMs: 0, outputTokens: 128 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
  for (let i = 0; i < 6; i++) {
    await send('like-bench', 256 + (i % 2));
    await send('long-prompts', 2048);
  }
  await eventually('both workloads recorded', async () => {
    const set = (await (await fetch(`${sidecar.adminUrl}/profile`)).json()) as { workloads: Array<{ requests: number }> };
    return set.workloads.map((w) => w.requests);
  }, (counts) => counts[0] === 6 && counts[1] === 6);
}, 20_000);

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

async function compare(workload: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const sink = (append: (text: string) => void) => new Writable({ write: (chunk: Buffer, _e, cb) => (append(chunk.toString('utf8')), cb()) });
  const code = await main(['profile', 'compare', '--admin', sidecar.adminUrl, '--workload', workload, '--result', GUIDELLM_JSON, '--window', '10m'], {
    stdout: sink((t) => (stdout += t)),
    stderr: sink((t) => (stderr += t)),
    env: {},
  });
  return { code, stdout, stderr };
}

describe('tokentap profile compare against a live sidecar', () => {
  it('passes production traffic shaped like the benchmark\'s (exit 0), showing what the sidecar measured', async () => {
    const { code, stdout, stderr } = await compare('like-bench');
    expect(stderr).toBe('');
    expect(stdout).toMatch(/requests +6 in \d+ s +46\n/);
    expect(stdout).toMatch(/input tokens mean ± stdev +257 ± 0\.5 +257 ± 0\.4\n/);
    expect(stdout).toMatch(/output tokens mean ± stdev +128 ± 0 +128 ± 0\n/);
    expect(stdout).toContain('Comparable: the benchmark\'s traffic is within tolerance of production\'s on every dimension both sides report.');
    expect(code).toBe(0);
  });

  it('flags prompts eight times as long as the benchmark\'s (exit 1), with both means', async () => {
    const { code, stdout, stderr } = await compare('long-prompts');
    expect(stderr).toBe('');
    expect(stdout).toContain('  ✗ input length mean: benchmark 257 tokens, production 2048 tokens (−87 %, tolerance ±20 %)');
    expect(stdout).not.toContain('output length');
    expect(code).toBe(1);
  });
});
