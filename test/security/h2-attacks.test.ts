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

describe('a client that opens a stream and never sends its body', () => {
  it('answers 408 after request_body_idle_timeout (outcome client_error, counted request_body_idle_timeout), not a 504 blaming the upstream after upstream_idle_timeout', async () => {
    const { upstream, sidecar } = await setUp('upstream_idle_timeout: 60s\nlimits:\n  request_body_idle_timeout: 400ms\n');
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    // HEADERS without END_STREAM, then nothing: the upstream (which answers at the body's end) waits for the client.
    const stream = session.request({ ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, { endStream: false });
    stream.on('error', () => {});
    const status = await new Promise<number>((resolve) => stream.once('response', (headers) => resolve(Number(headers[':status']))));
    expect(status).toBe(408);
    const line = await eventually('the request line', () => sidecar.logs.find((l) => l.outcome !== undefined), (l) => l !== undefined, 10_000);
    expect(line).toMatchObject({ outcome: 'client_error', status: 408 });
    expect(await limitCount(sidecar.adminUrl, 'request_body_idle_timeout')).toBe(1);
    await eventually('the upstream stream cancelled', () => upstream.streams, (n) => n === 1);
    await stillServes(sidecar.proxyUrl);
  });

  it('closes that stream with RST_STREAM(NO_ERROR) after the complete 408 (RFC 9113 section 8.1), so it does not stay open on the session', async () => {
    const { sidecar } = await setUp('limits:\n  request_body_idle_timeout: 300ms\n');
    const client = await raw(sidecar.proxyUrl);
    client.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, getRequestBlock('/v1/completions')));
    const resets = await eventually('the stream reset', () => client.frames().filter((f) => f.type === FRAME.RST_STREAM && f.streamId === 1), (f) => f.length > 0, 10_000);
    expect(resets.map((f) => f.payload.readUInt32BE(0))).toEqual([http2.constants.NGHTTP2_NO_ERROR]);
    const ends = client.frames().filter((f) => f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
    expect(ends).toHaveLength(1);
  });

  it('lets a streaming gRPC call whose request side stays open after its first message wait for its answer past request_body_idle_timeout', async () => {
    const { sidecar } = await setUp('limits:\n  request_body_idle_timeout: 200ms\n', () => ({ chunks: [Buffer.from('x')] }));
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    const stream = session.request({ ':method': 'POST', ':path': '/pkg.Svc/Stream', 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
    stream.on('error', () => {});
    stream.write(Buffer.from([0, 0, 0, 0, 0]));
    const outcome = await Promise.race([
      new Promise<string>((resolve) => stream.once('response', (headers) => resolve(`status ${headers[':status']}`))),
      new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 1_200)),
    ]);
    expect(outcome).toBe('still open');
    stream.end();
    const status = await new Promise<number>((resolve) => stream.once('response', (headers) => resolve(Number(headers[':status']))));
    expect(status).toBe(200);
  });
});

describe('an h2c upstream that stops taking a request body', () => {
  it('answers 504 after upstream_idle_timeout (outcome timeout): its silence is not the client`s, however long request_body_idle_timeout is', async () => {
    const stalledServer = http2.createServer();
    stalledServer.on('stream', (stream) => {
      stream.on('error', () => {});
      // Never read: node:http2 stops opening the window of a paused stream.
      stream.pause();
    });
    await new Promise<void>((resolve) => stalledServer.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => stalledServer.close(() => resolve())));
    const upstreamUrl = `http://127.0.0.1:${(stalledServer.address() as { port: number }).port}`;
    const sidecar = await startTestSidecar(upstreamUrl, 'upstream_protocol: h2c\nupstream_idle_timeout: 600ms\nlimits:\n  request_body_idle_timeout: 60s\n');
    cleanups.push(() => sidecar.close());
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    const upload = session.request({ ':method': 'POST', ':path': '/upload' });
    upload.on('error', () => {});
    const status = new Promise<number>((resolve) => upload.once('response', (headers) => resolve(Number(headers[':status']))));
    // Far more than the windows on the way hold: the upload blocks, and keeps offering.
    for (let i = 0; i < 64; i++) upload.write(Buffer.alloc(16 * 1024, 0x63));
    expect(await status).toBe(504);
    const line = await eventually('the request line', () => sidecar.logs.find((l) => l.msg === 'request'), (l) => l !== undefined, 10_000);
    expect(line).toMatchObject({ outcome: 'timeout', status: 504 });
  });
});

describe('an h2c upstream whose response head is too large', () => {
  it.each([
    ['one 200,000-byte field', { 'x-big': 'a'.repeat(200_000) }],
    ['300 fields', Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`x-h${i}`, 'v']))],
  ])('answers 502 upstream_error naming the upstream for %s, holding none of it, and the sidecar goes on', async (_what, headers) => {
    const { upstream, sidecar } = await setUp('', () => ({ chunks: [Buffer.from('ok')], headers }));
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    const answer = await h2Request(session, { ':path': '/v1/models' });
    expect(answer.head[':status']).toBe(502);
    expect(Object.keys(answer.head).some((name) => name.startsWith('x-'))).toBe(false);
    expect(answer.body.toString()).toContain(`upstream ${new URL(upstream.url).host} failed`);
    const line = await eventually('the request line', () => sidecar.logs.find((l) => l.msg === 'request'), (l) => l !== undefined);
    expect(line).toMatchObject({ outcome: 'upstream_error', status: 502 });
    await stillServes(sidecar.proxyUrl);
  });
});

describe('secrets in HTTP/2 requests', () => {
  it('logs no authorization, API key or cookie value of an HTTP/2 request, whether it is answered or refused', async () => {
    const { sidecar } = await setUp('', () => ({ chunks: [Buffer.from('{}')], headers: { 'content-type': 'application/json' }, ending: 'reset' }));
    const session = http2.connect(sidecar.proxyUrl);
    session.on('error', () => {});
    cleanups.push(() => {
      session.destroy();
    });
    const secrets = { authorization: 'Bearer sk-h2-secret-1', 'x-api-key': 'h2-secret-2', cookie: 'session=h2-secret-3' };
    await h2Request(session, { ':path': '/v1/models', ...secrets }).catch(() => undefined);
    await h2Request(session, { ':method': 'POST', ':path': '/pkg.Svc/Call', 'content-type': 'application/grpc', te: 'trailers', ...secrets }, Buffer.from([0, 0, 0, 0, 0])).catch(() => undefined);
    await eventually('both request lines', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 2);
    expect(JSON.stringify(sidecar.logs)).not.toMatch(/h2-secret/);
  });
});
