import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { startSidecar, type RunningSidecar } from '../../src/sidecar.js';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { eventually } from '../helpers/sidecar.js';
import { SeededRandom } from '../helpers/seeded-random.js';

/**
 * Privacy of the workload-shape record (docs/workload-profiles.md#privacy): prompts carrying
 * secrets go through the sidecar to the simulator, and then no export, no /metrics, no
 * /status.json, no status page and no log line may hold any of them, in the clear or in a
 * reversible encoding (base64 at every alignment, base64url, hex, URL or JSON escaping), nor the
 * fingerprint key. The key is passed in here only so the test knows what to look for.
 */
const API_KEY = 'sk-proj-7f3kQ9zX2LmN8pR4tV6wY1aB5cD0eFgHiJ';
const EMAIL = 'jane.doe+billing@example-corp.test';
const UNIQUE = new SeededRandom(99).letters(200);
const SECRETS = [API_KEY, EMAIL, UNIQUE];
const KEY = randomBytes(32);

const CONFIG = [
  'workloads:',
  '  - name: private',
  '    match: { header: { x-workload: private } }',
  '    profile: false',
  '  - name: chat',
  '',
].join('\n');

let simulator: RunningSimulator;
let sidecar: RunningSidecar;
const logLines: string[] = [];

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 1, outputTokens: 8 });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logLines.push(chunk.toString('utf8'));
      callback();
    },
  });
  const settings = loadSettings({ flags: { upstream: simulator.url, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: 'test.yaml' }, env: {}, readFile: () => CONFIG });
  sidecar = await startSidecar({ ...settings, modelDiscovery: undefined }, createLogger('info', sink), undefined, undefined, { profileKey: KEY });
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

/** A system prompt of 3,000 bytes (two blocks at 4 bytes a token) holding every secret, shared by half the requests. */
const SYSTEM = `You are the billing assistant. API key: ${API_KEY}. Escalate to ${EMAIL}. Reference ${UNIQUE}. `.padEnd(3000, 'Follow the policy. ');

async function send(index: number, workload: string): Promise<void> {
  const shared = index % 2 === 0;
  const messages = [
    ...(shared ? [{ role: 'system', content: SYSTEM }] : []),
    { role: 'user', content: `Question ${index}: my key is ${API_KEY}, mail me at ${EMAIL} about ${UNIQUE}. ${'More detail. '.repeat(40 + index)}` },
  ];
  const stream = index % 3 === 0;
  const response = await fetch(`${sidecar.proxyUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, 'x-workload': workload },
    body: JSON.stringify({ model: 'secret-model', messages, stream, ...(stream ? { stream_options: { include_usage: true } } : {}), max_tokens: 8 }),
  });
  await response.text();
  expect(response.status).toBe(200);
}

/** Every form a secret could leave in that a reader could turn back into it. */
function encodings(secret: Buffer): string[] {
  const forms = [secret.toString('latin1'), secret.toString('hex'), secret.toString('hex').toUpperCase(), encodeURIComponent(secret.toString('latin1')), JSON.stringify(secret.toString('latin1')).slice(1, -1)];
  // Base64 of the secret inside a longer text depends on its offset mod 3: the stable middle of each.
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset, 0x20), secret]).toString('base64');
    const stable = encoded.slice(Math.ceil((offset * 4) / 3) + 1, -4);
    forms.push(stable, stable.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return forms.filter((form) => form.length >= 8);
}

/** The secret's runs of 12 bytes: no piece of it either. */
function pieces(secret: string): string[] {
  const runs: string[] = [];
  for (let i = 0; i + 12 <= secret.length; i += 4) runs.push(secret.slice(i, i + 12));
  return runs;
}

describe('the workload-shape record keeps nothing of the prompts', () => {
  let outputs: Array<[where: string, text: string]>;

  beforeAll(async () => {
    for (let i = 0; i < 12; i++) await send(i, 'chat');
    for (let i = 0; i < 3; i++) await send(i, 'private');
    await eventually('the chat requests recorded', async () => (await (await fetch(`${sidecar.adminUrl}/profile/chat?format=json`)).json()) as { requests: number }, (p) => p.requests === 12);
    const admin = (path: string, headers: Record<string, string> = {}) => fetch(`${sidecar.adminUrl}${path}`, { headers }).then(async (r) => [path, `${r.status} ${JSON.stringify([...r.headers])} ${await r.text()}`] as [string, string]);
    outputs = await Promise.all([
      admin('/profile?format=json'),
      admin('/profile?format=aiperf'),
      admin('/profile/chat?format=json'),
      admin('/profile/chat?format=guidellm'),
      admin('/profile/chat?format=aiperf'),
      admin('/profile/chat?format=mooncake'),
      admin('/profile/private?format=json'),
      admin('/metrics'),
      admin('/status.json'),
      admin('/'),
    ]);
    outputs.push(['log', logLines.join('')]);
  });

  it('records the chat requests and their shared system prompt, and nothing of the workload with profile: false', async () => {
    const chat = (await (await fetch(`${sidecar.adminUrl}/profile/chat?format=json`)).json()) as { requests: number; inputTokens: { count: number }; prefixSharing: { sharedPrefixShare: number } };
    expect(chat.inputTokens.count).toBe(12);
    expect(chat.prefixSharing.sharedPrefixShare).toBe(0.5);
    const refused = await fetch(`${sidecar.adminUrl}/profile/private?format=mooncake`);
    expect(refused.status).toBe(404);
    const set = (await (await fetch(`${sidecar.adminUrl}/profile`)).json()) as { workloads: Array<{ workload: string }>; mix: Record<string, number> };
    expect(set.workloads.map((w) => w.workload)).toEqual(['chat']);
    expect(set.mix).toEqual({ chat: 1 });
  });

  it('puts no secret, nor any piece or reversible encoding of one, in any export, /metrics, /status.json, the page or a log line', () => {
    expect(outputs.find(([where]) => where === '/profile/chat?format=mooncake')?.[1]).toMatch(/^200 /);
    for (const secret of SECRETS) {
      for (const form of [...encodings(Buffer.from(secret, 'utf8')), ...pieces(secret)]) {
        for (const [where, text] of outputs) expect(text.includes(form), `${where} holds ${JSON.stringify(form)} of a secret`).toBe(false);
      }
    }
  });

  it('names no model in a profile or an export (the model is a metric label, not part of a workload\'s shape)', () => {
    const profiles = outputs.filter(([where]) => where.startsWith('/profile'));
    expect(profiles).toHaveLength(7);
    for (const [where, text] of profiles) expect(text.includes('secret-model'), `${where} names the model`).toBe(false);
  });

  it('never lets the fingerprint key out, in any encoding', () => {
    for (const form of encodings(KEY)) {
      for (const [where, text] of outputs) expect(text.includes(form), `${where} holds the key`).toBe(false);
    }
  });

  it('exports small hash ids from a table, not the keyed hashes', () => {
    const trace = outputs.find(([where]) => where === '/profile/chat?format=mooncake')?.[1] ?? '';
    const rows = trace.slice(trace.indexOf('{')).trim().split('\n').map((line) => JSON.parse(line) as { hash_ids: number[] });
    const ids = rows.flatMap((row) => row.hash_ids);
    expect(Math.max(...ids)).toBeLessThan(ids.length);
  });
});
