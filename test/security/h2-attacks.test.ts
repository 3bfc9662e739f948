import http2 from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { FLAG, FRAME, frame, getRequestBlock, literal, RawH2Client } from '../helpers/h2-frames.js';
import { h2Request, startH2cReplayUpstream, type H2Script } from '../helpers/h2c-upstream.js';
import { startCaptureUpstream } from '../helpers/capture-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * HTTP/2's own attack classes against the proxy listener (issue 24 item 7; RFC 9113 section 10.5),
 * each written as raw frames on a socket where Node's client refuses to misbehave, each asserting
 * what the upstream was made to do (the cost an attack passes on to the engine), what the attacker
 * got back, and the limit counter.
 */

const { NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_REFUSED_STREAM } = http2.constants;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(config = '', script: () => H2Script = () => ({ chunks: [Buffer.from('{"data":[]}')], headers: { 'content-type': 'application/json' } })) {
  // `/alive` is always answered: stillServes() asks it after an attack.
  const upstream = await startH2cReplayUpstream((request) => (request.headers[':path'] === '/alive' ? { chunks: [Buffer.from('ok')] } : script()));
  cleanups.push(() => upstream.close());
  const sidecar = await startTestSidecar(upstream.url, `upstream_protocol: h2c\n${config}`);
  cleanups.push(() => sidecar.close());
  return { upstream, sidecar };
}

async function raw(url: string): Promise<RawH2Client> {
  const client = await RawH2Client.connect(url);
  cleanups.push(() => client.close());
  return client;
}

async function limitCount(adminUrl: string, limit: string): Promise<number> {
  return sumValues(await scrape(adminUrl), 'tokentap_limit_exceeded_total', { limit });
}

/** The listener still serves a well-behaved client: the attack cost its own connection only. */
async function stillServes(proxyUrl: string): Promise<void> {
  const session = http2.connect(proxyUrl);
  session.on('error', () => {});
  try {
    const answer = await h2Request(session, { ':path': '/alive' });
    expect(answer.head[':status']).toBe(200);
  } finally {
    session.destroy();
  }
}

describe('rapid reset (CVE-2023-44487)', () => {
  it('closes with GOAWAY(ENHANCE_YOUR_CALM) a session that opens and resets streams in a loop, past h2_client_resets_per_second, so the upstream sees a bounded number of them', async () => {
    const { upstream, sidecar } = await setUp('limits:\n  h2_client_resets_per_second: 50\n', () => ({ chunks: [Buffer.from('x')], ending: 'hang' }));
    const client = await raw(sidecar.proxyUrl);
    const attempts = 5_000;
    const block = getRequestBlock();
    for (let i = 0, id = 1; i < attempts; i++, id += 2) {
      // One write per stream, as an attacker's loop does; the bytes may arrive in one read or many.
      if (!client.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, block), frame(FRAME.RST_STREAM, 0, id, Buffer.from([0, 0, 0, 8]))]))) break;
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    await eventually('the session to close', () => client.closed, (closed) => closed, 10_000);
    expect(client.goawayCode()).toBe(NGHTTP2_ENHANCE_YOUR_CALM);
    expect(await limitCount(sidecar.adminUrl, 'h2_client_resets_per_second')).toBe(1);
    // A naive relay passes every one of the 5,000 on; the bound here is the limit and what had
    // already been read when it tripped.
    expect(upstream.streams).toBeLessThan(attempts / 4);
    await stillServes(sidecar.proxyUrl);
  });
});

describe('header floods', () => {
  it('ends the session at the ninth CONTINUATION frame of a header block that never ends (CVE-2024-27316 class), forwarding nothing', async () => {
    const { upstream, sidecar } = await setUp();
    const client = await raw(sidecar.proxyUrl);
    client.write(frame(FRAME.HEADERS, 0, 1, getRequestBlock()));
    for (let i = 0; i < 10_000 && !client.closed; i++) {
      client.write(frame(FRAME.CONTINUATION, 0, 1, literal(`x-flood-${i}`, 'y'.repeat(40))));
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    await eventually('the session to close', () => client.closed, (closed) => closed, 10_000);
    expect(client.goawayCode()).not.toBeUndefined();
    expect(upstream.streams).toBe(0);
    expect(await limitCount(sidecar.adminUrl, 'h2_continuation_frames')).toBe(1);
    await stillServes(sidecar.proxyUrl);
  });

  it('refuses a request whose header list exceeds h2_max_header_list_bytes (an HPACK bomb decodes to this), forwarding nothing', async () => {
    const { upstream, sidecar } = await setUp('limits:\n  h2_max_header_list_bytes: 8192\n');
    const client = await raw(sidecar.proxyUrl);
    // 16,000 bytes of field value in one HEADERS frame (under the 16 KiB max frame size): twice the
    // limit. The SETTINGS are not acknowledged, so only tokentap's own check applies.
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, Buffer.concat([getRequestBlock(), literal('x-big', 'y'.repeat(16_000))])));
    // 431, as the HTTP/1.1 listener answers an oversized head: HEADERS on stream 1, `:status` as a literal 431.
    await eventually('the answer', () => client.frames().find((f) => f.type === FRAME.HEADERS && f.streamId === 1), (f) => f !== undefined, 5_000);
    const answer = client.frames().find((f) => f.type === FRAME.HEADERS && f.streamId === 1);
    expect(answer?.payload.includes(Buffer.from('431'))).toBe(true);
    expect((answer?.flags ?? 0) & FLAG.END_STREAM).toBe(FLAG.END_STREAM);
    await new Promise((r) => setTimeout(r, 100));
    expect(upstream.streams).toBe(0);
    expect(await limitCount(sidecar.adminUrl, 'h2_max_header_list_bytes')).toBe(1);
    await stillServes(sidecar.proxyUrl);
  });

  it('refuses a request with more header fields than node:http2 allows (128), forwarding nothing', async () => {
    const { upstream, sidecar } = await setUp();
    const client = await raw(sidecar.proxyUrl);
    const fields = Array.from({ length: 300 }, (_, i) => literal(`x-f${i}`, 'v'));
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, Buffer.concat([getRequestBlock(), ...fields])));
    await eventually('a reset, GOAWAY or close', () => client.resetCodes().length + (client.goawayCode() === undefined ? 0 : 1) + (client.closed ? 1 : 0), (n) => n > 0, 5_000);
    await new Promise((r) => setTimeout(r, 100));
    expect(upstream.streams).toBe(0);
  });
});

describe('control frame floods', () => {
  for (const [what, flood] of [
    ['SETTINGS', () => frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 3, 0, 0, 0, 100]))],
    ['PING', () => frame(FRAME.PING, 0, 0, Buffer.alloc(8))],
  ] as const) {
    it(`ends a session flooded with ${what} frames whose acknowledgements it does not read, counted h2_flood, memory bounded`, async () => {
      const { sidecar } = await setUp();
      const client = await raw(sidecar.proxyUrl);
      // The attacker never reads: each frame queues an ACK that cannot be sent.
      client.socket.pause();
      const one = flood();
      const batch = Buffer.concat(Array.from({ length: 1_000 }, () => one));
      for (let i = 0; i < 200 && !client.closed; i++) {
        client.write(batch);
        await new Promise((r) => setImmediate(r));
      }
      client.socket.resume();
      await eventually('the session to close', () => client.closed, (closed) => closed, 10_000);
      expect(await limitCount(sidecar.adminUrl, 'h2_flood')).toBe(1);
      await stillServes(sidecar.proxyUrl);
    });
  }
});

describe('too many concurrent streams', () => {
  it('refuses streams past h2_max_concurrent_streams with REFUSED_STREAM, even from a client that never acknowledges the SETTINGS, so the upstream holds at most that many', async () => {
    const { upstream, sidecar } = await setUp('limits:\n  h2_max_concurrent_streams: 8\n', () => ({ chunks: [Buffer.from('x')], ending: 'hang' }));
    const client = await raw(sidecar.proxyUrl);
    const block = getRequestBlock();
    // Streams left open (no END_STREAM): each would hold an upstream stream. The server's SETTINGS
    // are never acknowledged, so nghttp2 does not apply them yet (RFC 9113 section 6.5.3).
    for (let i = 0, id = 1; i < 300 && !client.closed; i++, id += 2) client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block));
    // Each refusal is one RST_STREAM frame and no upstream work.
    await eventually('292 refusals', () => client.resetCodes().length, (n) => n >= 292, 10_000);
    expect(client.resetCodes().every((code) => code === NGHTTP2_REFUSED_STREAM)).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(upstream.streams).toBe(8);
    await stillServes(sidecar.proxyUrl);
  });

  it('holds the upstream to h2_max_concurrent_streams for a client that acknowledged them too (nghttp2 then refuses the excess itself)', async () => {
    const { upstream, sidecar } = await setUp('limits:\n  h2_max_concurrent_streams: 8\n', () => ({ chunks: [Buffer.from('x')], ending: 'hang' }));
    const client = await raw(sidecar.proxyUrl);
    await eventually('the server SETTINGS', () => client.frames().some((f) => f.type === FRAME.SETTINGS && f.flags === 0), (seen) => seen);
    client.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
    await new Promise((r) => setTimeout(r, 50));
    const block = getRequestBlock();
    for (let i = 0, id = 1; i < 300 && !client.closed; i++, id += 2) client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block));
    await eventually('the session to close', () => client.closed, (closed) => closed, 10_000);
    expect(upstream.streams).toBeLessThanOrEqual(8);
    await stillServes(sidecar.proxyUrl);
  });
});

describe('flow-control windows that never open', () => {
  it('holds about one stream window of a response whose client never opens its window, while another stream of that client completes', async () => {
    const chunk = Buffer.alloc(16 * 1024, 0x62);
    const { upstream, sidecar } = await setUp('', () => ({ chunks: Array.from({ length: 512 }, () => chunk) }));
    const client = await raw(sidecar.proxyUrl);
    // Stream 1 asks for 8 MiB and never sends WINDOW_UPDATE: the client's window (65,535) fills.
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, getRequestBlock('/stalled')));
    await new Promise((r) => setTimeout(r, 500));
    const stalled = upstream.seen.find((s) => s.headers[':path'] === '/stalled');
    // 8 MiB offered: what left the upstream is about the windows and buffers on the way, well under 1 MiB.
    expect(stalled?.written).toBeGreaterThan(0);
    expect(stalled?.written).toBeLessThan(1 << 20);
    // A client reading normally on another session is served in full meanwhile.
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    const full = await h2Request(session, { ':path': '/flowing' });
    expect(full.body.length).toBe(512 * chunk.length);
  });

  it('stops reading a client`s upload when the upstream never opens its window, holding about one window, while other streams go on', async () => {
    const stalledServer = http2.createServer();
    let received = 0;
    stalledServer.on('stream', (stream, headers) => {
      stream.on('error', () => {});
      if (headers[':path'] === '/upload') {
        // Never read: node:http2 stops opening the window of a paused stream.
        stream.pause();
        stream.on('data', (d: Buffer) => (received += d.length));
        return;
      }
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    await new Promise<void>((resolve) => stalledServer.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => stalledServer.close(() => resolve())));
    const sidecar = await startTestSidecar(`http://127.0.0.1:${(stalledServer.address() as { port: number }).port}`, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    const upload = session.request({ ':method': 'POST', ':path': '/upload' });
    upload.on('error', () => {});
    let flushed = 0;
    const chunk = Buffer.alloc(16 * 1024, 0x63);
    // Offer up to 8 MiB, one chunk at a time: a chunk counts once the client's session has sent
    // it (tokentap's window permitting); the offer stops when one has waited 300 ms.
    for (let i = 0; i < 512; i++) {
      const sent = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 300);
        upload.write(chunk, () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (!sent) break;
      flushed += chunk.length;
    }
    expect(flushed).toBeGreaterThan(0);
    expect(flushed).toBeLessThan(1 << 20);
    expect(received).toBe(0);
    const other = await h2Request(session, { ':path': '/other' });
    expect(other.body.toString()).toBe('ok');
    upload.close();
  });
});

describe('fields HTTP/1.1 cannot carry', () => {
  it('never forwards a field whose value holds a control character to the HTTP/1.1 upstream (nghttp2 drops it), and the sidecar goes on', async () => {
    const upstream = await startCaptureUpstream();
    cleanups.push(() => upstream.close());
    const sidecar = await startTestSidecar(upstream.url);
    cleanups.push(() => sidecar.close());
    upstream.mark();
    const client = await raw(sidecar.proxyUrl);
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, Buffer.concat([getRequestBlock(), literal('x-bad', 'a\u0001b'), literal('x-good', 'c')])));
    await eventually('the answer', () => client.frames().find((f) => f.type === FRAME.HEADERS && f.streamId === 1), (f) => f !== undefined, 5_000);
    const sent = upstream.since();
    expect(sent).toMatch(/\r\nx-good: c\r\n/);
    expect(sent).not.toContain('x-bad');
    expect(sent).not.toContain('\u0001');
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    expect((await h2Request(session, { ':path': '/v1/models' })).head[':status']).toBe(200);
  });
});
