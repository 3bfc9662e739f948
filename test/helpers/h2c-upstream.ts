import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

/** One scripted HTTP/2 response of the test upstream. */
export interface H2Script {
  status?: number;
  headers?: Record<string, string>;
  chunks: readonly Buffer[];
  /** Pause before each chunk (ms). */
  gapMs?: number;
  trailers?: Record<string, string>;
  /** How the response ends: END_STREAM (with trailers if any), RST_STREAM(INTERNAL_ERROR), or never. */
  ending?: 'clean' | 'reset' | 'hang';
  /** The answer is the head alone, with END_STREAM (gRPC's trailers-only response). */
  headOnly?: boolean;
}

export interface H2SeenRequest {
  headers: http2.IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  /** The RST_STREAM code the upstream received on this stream, if the client side reset it. */
  resetCode?: number;
  /** performance.now() when that reset arrived. */
  resetAtMs?: number;
  /** Bytes of the response this upstream could hand to its session (flow control permitting). */
  written: number;
}

/**
 * An h2c (prior knowledge) upstream that replays scripted bytes exactly, one DATA write per chunk,
 * and records what each stream asked and whether it was reset: the HTTP/2 counterpart of
 * replay-upstream.ts. `streams` counts every stream opened, even those reset before their body.
 */
export async function startH2cReplayUpstream(script: (request: H2SeenRequest) => H2Script, settings: http2.Settings = {}) {
  const seen: H2SeenRequest[] = [];
  let streams = 0;
  let resets = 0;
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer({ settings });
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    session.on('error', () => {});
  });
  server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
    streams++;
    const request: H2SeenRequest = { headers, rawHeaders, body: Buffer.alloc(0), written: 0 };
    const parts: Buffer[] = [];
    stream.on('error', () => {});
    stream.on('close', () => {
      if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) resets++;
      if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR && request.resetCode === undefined) {
        request.resetCode = stream.rstCode;
        request.resetAtMs = performance.now();
      }
    });
    stream.on('data', (chunk: Buffer) => parts.push(chunk));
    stream.on('end', async () => {
      request.body = Buffer.concat(parts);
      seen.push(request);
      const s = script(request);
      if (stream.destroyed) return;
      const head = { ':status': s.status ?? 200, 'content-type': 'text/event-stream', ...s.headers };
      if (s.headOnly) {
        stream.respond({ ...head, ...s.trailers }, { endStream: true });
        return;
      }
      stream.respond(head, { waitForTrailers: s.trailers !== undefined });
      if (s.trailers !== undefined) stream.once('wantTrailers', () => stream.sendTrailers(s.trailers as Record<string, string>));
      for (const chunk of s.chunks) {
        if (s.gapMs) await new Promise((r) => setTimeout(r, s.gapMs));
        if (stream.destroyed) return;
        stream.write(chunk, () => {
          request.written += chunk.length;
        });
      }
      if (s.ending === 'reset') {
        await new Promise((r) => setTimeout(r, 5));
        // destroy() with an error resets the stream INTERNAL_ERROR at once; close(code) would first end it cleanly.
        stream.destroy(new Error('scripted reset'));
      } else if (s.ending !== 'hang') {
        stream.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    get streams() {
      return streams;
    },
    /** Streams the client side reset (closed with a code other than NO_ERROR), whether or not their body had ended. */
    get resets() {
      return resets;
    },
    /** Sends GOAWAY on every session (graceful: last-stream-id is the last stream started). */
    goaway() {
      for (const session of sessions) session.goaway();
    },
    async close() {
      for (const session of sessions) session.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A prior-knowledge HTTP/2 client session to `url` whose errors are ignored (tests assert on streams), destroyed by the test's cleanups. */
export function connectH2(url: string, cleanups: Array<() => Promise<void> | void>): http2.ClientHttp2Session {
  const session = http2.connect(url);
  session.on('error', () => {});
  cleanups.push(() => {
    session.destroy();
  });
  return session;
}

/** A prior-knowledge HTTP/2 client request: the response head, the body bytes as received, the trailers and how the stream closed. */
export async function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer) {
  const stream = session.request(headers, { endStream: body === undefined });
  if (body !== undefined) stream.end(body);
  const chunks: Buffer[] = [];
  let head: http2.IncomingHttpHeaders = {};
  let trailers: http2.IncomingHttpHeaders | undefined;
  stream.on('response', (h) => (head = h));
  stream.on('trailers', (t) => (trailers = t));
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  const rstCode = await new Promise<number>((resolve) => {
    stream.on('error', () => {});
    stream.on('close', () => resolve(stream.rstCode ?? 0));
  });
  return { head, body: Buffer.concat(chunks), trailers, rstCode, chunks };
}
