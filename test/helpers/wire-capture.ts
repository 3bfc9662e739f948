import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type net from 'node:net';
import { fileURLToPath } from 'node:url';
import type { RawRequest } from './raw-http.js';

const STREAMS = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'streams');

/** One socket read of a `*.wire.jsonl` capture (test/fixtures/README.md). */
export interface WireRead {
  readonly tMs: number;
  readonly dir: 'c2s' | 's2c' | 'c2s-end' | 's2c-end';
  readonly bytes: Buffer;
}

/** One response of a capture: its reads, timed from the end of the request that asked for it. */
export interface CapturedResponse {
  readonly reads: ReadonlyArray<{ readonly atMs: number; readonly bytes: Buffer }>;
  /** The server closed the connection this long after its last read, before the client did anything; undefined when it kept it. */
  readonly closeAfterMs: number | undefined;
  /** Every byte of the response as it was on the wire, head and framing included. */
  readonly wire: Buffer;
}

export function wireCapture(protocol: string, name: string): WireRead[] {
  return readFileSync(join(STREAMS, protocol, name), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const read = JSON.parse(line) as { t_ms: number; dir: WireRead['dir']; b64: string };
      return { tMs: read.t_ms, dir: read.dir, bytes: Buffer.from(read.b64, 'base64') };
    });
}

/** The capture's responses in order: the s2c reads after each request, and whether the server closed after it. */
export function capturedResponses(reads: readonly WireRead[]): CapturedResponse[] {
  const responses: Array<{ reads: Array<{ atMs: number; bytes: Buffer }>; closeAfterMs: number | undefined }> = [];
  let requestAtMs = 0;
  let clientClosed = false;
  for (const read of reads) {
    if (read.dir === 'c2s') {
      if (responses.length === 0 || (responses.at(-1)?.reads.length ?? 0) > 0) responses.push({ reads: [], closeAfterMs: undefined });
      requestAtMs = read.tMs;
    } else if (read.dir === 's2c') {
      responses.at(-1)?.reads.push({ atMs: read.tMs - requestAtMs, bytes: read.bytes });
    } else if (read.dir === 'c2s-end') {
      clientClosed = true;
    } else if (!clientClosed) {
      const last = responses.at(-1);
      if (last !== undefined) last.closeAfterMs = read.tMs - requestAtMs - (last.reads.at(-1)?.atMs ?? 0);
    }
  }
  return responses.filter((r) => r.reads.length > 0).map((r) => ({ ...r, wire: Buffer.concat(r.reads.map((x) => x.bytes)) }));
}

export interface ReplayOptions {
  /** Multiplies every captured time (0: all reads at once, in order, as separate writes). */
  readonly timeScale: number;
  /** Holds the chunked body's terminator `0\r\n\r\n`, when the capture wrote it on its own, this much longer. */
  readonly holdTerminatorMs?: number;
}

/**
 * A raw upstream's answer (raw-http.ts) that replays a capture's responses in turn on each
 * connection: each captured read written on its own at its captured time after the request, and
 * the connection closed as the server closed it (llama-server: 0.3 ms after the last chunk,
 * without `Connection: close`). A request that arrives on a connection the replay has closed is
 * lost, as it was against the real server.
 */
export function replayResponder(responses: readonly CapturedResponse[], options: ReplayOptions) {
  const perConnection = new Map<number, number>();
  /** Connections whose server side is closing: what arrives on them is never answered (llama-server is past its read loop). */
  const closing = new Set<number>();
  return (request: RawRequest, socket: net.Socket): void => {
    if (closing.has(request.connection)) return;
    const index = perConnection.get(request.connection) ?? 0;
    perConnection.set(request.connection, index + 1);
    const response = responses[index % responses.length] as CapturedResponse;
    const startedMs = performance.now();
    let next = 0;
    const writeDue = (): void => {
      if (socket.destroyed) return;
      const read = response.reads[next];
      if (read === undefined) {
        if (response.closeAfterMs !== undefined) {
          closing.add(request.connection);
          setTimeout(() => socket.destroy(), response.closeAfterMs * options.timeScale);
        }
        return;
      }
      let dueMs = read.atMs * options.timeScale;
      if (options.holdTerminatorMs !== undefined && read.bytes.toString('latin1') === '0\r\n\r\n') dueMs += options.holdTerminatorMs;
      const waitMs = startedMs + dueMs - performance.now();
      if (waitMs > 0) {
        setTimeout(() => {
          next++;
          socket.write(read.bytes);
          writeDue();
        }, Math.max(0, waitMs));
        return;
      }
      next++;
      socket.write(read.bytes);
      writeDue();
    };
    writeDue();
  };
}

/** The data of a chunked body (framing removed), from the start of `wire`'s body. */
export function dechunk(wire: Buffer): Buffer {
  const headEnd = wire.indexOf('\r\n\r\n');
  let offset = headEnd + 4;
  const parts: Buffer[] = [];
  for (;;) {
    const lineEnd = wire.indexOf('\r\n', offset);
    const size = parseInt(wire.subarray(offset, lineEnd).toString('latin1'), 16);
    if (size === 0) break;
    parts.push(wire.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
