import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FLAG, FRAME, frame, headerBlock, PREFACE } from '../helpers/h2-frames.js';
import { startRawUpstream } from '../helpers/raw-http.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';

/**
 * Clients that would hold a pod's shutdown open if they could: a reader that stops reading an
 * HTTP/1.1 stream, an HTTP/2 client that stops reading its stream (its window closes), a socket
 * that never sends a byte and one that never finishes its head. The drain deadline is what bounds
 * the shutdown (the kubelet's SIGKILL comes at the grace period): the process exits 0 shortly after
 * it, each stream counted `shutdown`. The built CLI, a real SIGTERM, raw sockets.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const BODY = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'never read' }] });
/** One SSE event of 16 KiB as a chunk: an endless stream fills every buffer up to a client that stops reading. */
const EVENT = `data: {"choices":[{"index":0,"delta":{"content":"${'x'.repeat(16 * 1024)}"}}]}\n\n`;
const CHUNK = `${Buffer.byteLength(EVENT).toString(16)}\r\n${EVENT}\r\n`;

/** An upstream that streams for as long as its reader takes bytes, and waits when it does not. */
async function endlessUpstream() {
  const upstream = await startRawUpstream((_request, socket) => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
    const pump = (): void => {
      while (!socket.destroyed && socket.write(CHUNK));
    };
    socket.on('drain', pump);
    pump();
  });
  cleanups.push(() => upstream.close());
  return upstream;
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
    cleanups.push(() => socket.destroy());
  });
}

describe('clients that never let go', () => {
  it('hold the shutdown no longer than drain_timeout: streams cut and counted shutdown, idle and half-sent connections closed at once, exit 0', async () => {
    const upstream = await endlessUpstream();
    const serve = await startServeProcess(upstream.url, ['--drain-timeout', '2s']);
    cleanups.push(serve.kill);
    const port = Number(new URL(serve.proxy).port);

    const slowReader = await connect(port);
    slowReader.pause();
    slowReader.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`);

    // Prior knowledge HTTP/2: the preface, empty SETTINGS, one stream; then nothing is read, so
    // neither its SETTINGS ACK nor a WINDOW_UPDATE ever comes.
    const h2Reader = await connect(port);
    h2Reader.pause();
    const head = headerBlock([
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', '/v1/chat/completions'],
      [':authority', 'x'],
      ['content-type', 'application/json'],
    ]);
    h2Reader.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0), frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, head), frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from(BODY))]));

    const silent = await connect(port);
    const halfHead = await connect(port);
    halfHead.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    const closed = (socket: net.Socket) => new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    const silentClosed = closed(silent);
    const halfHeadClosed = closed(halfHead);

    await eventually('both streams in flight', () => fetch(`${serve.admin}/metrics`).then((r) => r.text()), (text) => /tokentap_requests_in_flight\S* 2\b/.test(text));
    const signalledAt = performance.now();
    serve.child.kill('SIGTERM');

    const exit = await serve.exit;
    expect(exit.code).toBe(0);
    // 2 s of drain, at most 2 s for the cut requests to be recorded, and room for a loaded machine;
    // exit code 0 already says it ended before drain_timeout + 10 s, when it would exit 1.
    expect(exit.atMs - signalledAt).toBeLessThan(11_000);
    expect(await silentClosed).toBeLessThan(signalledAt + 2_000);
    expect(await halfHeadClosed).toBeLessThan(signalledAt + 2_000);
    expect(
      serve
        .logs()
        .filter((l) => l.msg === 'request')
        .map((l) => l.outcome),
    ).toEqual(['shutdown', 'shutdown']);
    expect(serve.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('tokentap drain timeout'))).toMatchObject({ drained: false, cut_connections: 2 });
  }, 60_000);
});
