import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startCaptureUpstream } from '../helpers/capture-upstream.js';
import { FLAG, FRAME, frame, getRequestBlock, PREFACE } from '../helpers/h2-frames.js';
import { startH2cReplayUpstream } from '../helpers/h2c-upstream.js';
import { RawClient } from '../helpers/raw-http.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * One listener, two protocols (issue 24 item 1): with `upstream_protocol: h2c`, the first bytes of
 * a connection tell HTTP/2 prior knowledge from HTTP/1.1, once, however they are split.
 */

/** The setting as docs/forwarding.md shows it (docs are tested as written). */
const H2C_CONFIG = /## HTTP\/2 \(h2c\)[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readFileSync('docs/forwarding.md', 'utf8'))?.[1] as string;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('telling HTTP/2 from HTTP/1.1 by the first bytes', () => {
  it('relays an HTTP/1.1 request whose first read is `P` (a prefix of the preface) byte for byte as tokentap does without h2c', async () => {
    const upstream = await startCaptureUpstream();
    cleanups.push(() => upstream.close());
    const plain = await startTestSidecar(upstream.url);
    cleanups.push(() => plain.close());
    const h2c = await startTestSidecar(upstream.url, 'upstream_protocol: h2c\n');
    cleanups.push(() => h2c.close());
    const request = 'POST /v1/chat/completions HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"model":"one"}';
    const sent: string[] = [];
    const answers: string[] = [];
    for (const sidecar of [plain, h2c]) {
      upstream.mark();
      const client = await RawClient.connect(sidecar.proxyUrl);
      cleanups.push(() => client.close());
      client.write(request.slice(0, 1));
      await new Promise((r) => setTimeout(r, 30));
      client.write(request.slice(1));
      answers.push(await client.read((text) => /\r\n\r\n/.test(text)));
      sent.push(upstream.since());
    }
    expect(sent[1]).toBe(sent[0]);
    expect(sent[1]).toContain('{"model":"one"}');
    expect(answers[1]?.split('\r\n')[0]).toBe(answers[0]?.split('\r\n')[0]);
  });

  it('serves a prior-knowledge client whose preface arrives one byte per read, with the setting as docs/forwarding.md shows it', async () => {
    expect(H2C_CONFIG).toMatch(/^upstream_protocol: h2c/);
    const upstream = await startH2cReplayUpstream(() => ({ chunks: [Buffer.from('ok')] }));
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url, H2C_CONFIG);
    cleanups.push(() => sidecar.close());
    const { port } = new URL(sidecar.proxyUrl);
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.setNoDelay(true);
    cleanups.push(() => {
      socket.destroy();
    });
    let received = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => (received = Buffer.concat([received, d])));
    socket.on('error', () => {});
    await new Promise((r) => socket.once('connect', r));
    for (const byte of PREFACE) {
      socket.write(Buffer.from([byte]));
      await new Promise((r) => setTimeout(r, 2));
    }
    socket.write(Buffer.concat([frame(FRAME.SETTINGS, 0, 0), frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, getRequestBlock('/v1/models'))]));
    await eventually('the answer on stream 1', () => received.length, () => received.includes(Buffer.from('ok')), 5_000);
    expect(upstream.seen[0]?.headers[':path']).toBe('/v1/models');
  });
});
