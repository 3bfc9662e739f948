import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One scripted response of the test upstream. */
export interface Script {
  status?: number;
  headers?: Record<string, string>;
  chunks: readonly Buffer[];
  /** Pause before each chunk (ms). */
  gapMs?: number;
  /** How the response ends: cleanly, by a socket reset, or never (hang until the client leaves). */
  ending?: 'clean' | 'reset' | 'hang';
}

export interface SeenRequest {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
  /** performance.now() when the upstream saw the connection close before the response ended, if it did. */
  closedEarlyAtMs?: number;
}

/**
 * A minimal upstream that replays scripted bytes exactly, one write per chunk, and records what it
 * was asked. It stands in for an inference server where the bytes matter more than the protocol.
 */
export async function startReplayUpstream(script: (req: SeenRequest) => Script) {
  const seen: SeenRequest[] = [];
  const server = http.createServer({ noDelay: true }, (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', async () => {
      const request: SeenRequest = { method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders, body: Buffer.concat(parts) };
      seen.push(request);
      res.on('close', () => {
        if (!res.writableFinished) request.closedEarlyAtMs = performance.now();
      });
      const s = script(request);
      res.writeHead(s.status ?? 200, { 'content-type': 'text/event-stream', ...s.headers });
      res.flushHeaders();
      for (const chunk of s.chunks) {
        if (s.gapMs) await new Promise((r) => setTimeout(r, s.gapMs));
        if (res.destroyed) return;
        res.write(chunk);
      }
      if (s.ending === 'reset') {
        await new Promise((r) => setTimeout(r, 5));
        res.socket?.resetAndDestroy();
      } else if (s.ending !== 'hang') {
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A raw HTTP exchange: status, headers, each body chunk with its arrival time, and how it ended. */
export interface Exchange {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  chunks: Array<{ data: Buffer; atMs: number }>;
  body: Buffer;
  startedAtMs: number;
  ended: 'clean' | 'error';
}

export function exchange(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer; abortAfterMs?: number } = {},
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const startedAtMs = performance.now();
    const req = http.request(url, { method: options.method ?? 'GET', headers: options.headers, agent: false });
    req.on('error', (error) => {
      if (options.abortAfterMs !== undefined) return;
      reject(error);
    });
    req.on('response', (res) => {
      const result: Exchange = { status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, chunks: [], body: Buffer.alloc(0), startedAtMs, ended: 'clean' };
      res.on('data', (data: Buffer) => result.chunks.push({ data, atMs: performance.now() }));
      const finish = (ended: 'clean' | 'error') => {
        result.ended = ended;
        result.body = Buffer.concat(result.chunks.map((c) => c.data));
        resolve(result);
      };
      res.on('end', () => finish('clean'));
      res.on('error', () => finish('error'));
      res.on('close', () => {
        if (!res.complete) finish('error');
      });
    });
    if (options.abortAfterMs !== undefined) setTimeout(() => req.destroy(), options.abortAfterMs);
    req.end(options.body);
  });
}
