import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RawClient, startRawUpstream } from '../../helpers/raw-http.js';
import { cpuMs, limitCount, rssMiB, sleep, startSidecarProcess, witnessStream, type SidecarProcess } from './harness.js';

const HINT = 'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n';

/** Writes 103 heads as fast as the socket takes them, for at most `forMs` or until it closes. */
async function floodHints(socket: net.Socket, forMs: number): Promise<void> {
  const until = performance.now() + forMs;
  const batch = HINT.repeat(256);
  while (!socket.destroyed && performance.now() < until) {
    if (!socket.write(batch)) {
      await new Promise<void>((resolve) => {
        socket.once('drain', resolve);
        socket.once('close', resolve);
        setTimeout(resolve, 100);
      });
    }
  }
}

/** An SSE stream of `events` chunks 20 ms apart: the witness's answer from the same upstream. */
async function streamEvents(socket: net.Socket, events: number): Promise<void> {
  socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
  for (let i = 0; i < events && !socket.destroyed; i++) {
    const event = `data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}]}\n\n`;
    socket.write(`${event.length.toString(16)}\r\n${event}\r\n`);
    await sleep(20);
  }
  const done = 'data: [DONE]\n\n';
  socket.write(`${done.length.toString(16)}\r\n${done}\r\n0\r\n\r\n`);
}

/** /flood gets endless 103s for `floodMs`; anything else a 40-event stream. */
async function hostileUpstream(floodMs: number) {
  return startRawUpstream((request, socket) => {
    if (request.target === '/flood') void floodHints(socket, floodMs);
    else void streamEvents(socket, 40);
  });
}

describe('limits.interim_responses: 1xx heads per request', () => {
  let sidecar: SidecarProcess | undefined;
  afterEach(() => {
    sidecar?.stop();
  });

  it('cuts an upstream that sends endless 103s: 8 reach the client, then 502, counted; memory, CPU and another stream bounded', async () => {
    const upstream = await hostileUpstream(3_000);
    try {
      sidecar = await startSidecarProcess(upstream.url);
      await witnessStream(sidecar.proxy);
      const beforeRss = rssMiB(sidecar.pid);
      const beforeCpu = cpuMs(sidecar.pid);
      const witness = witnessStream(sidecar.proxy);
      const answers = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const client = await RawClient.connect(sidecar!.proxy);
          client.write('GET /flood HTTP/1.1\r\nHost: x\r\n\r\n');
          return client.readToClose(10_000);
        }),
      );
      for (const text of answers) {
        // Eight hints reach the client (limits.interim_responses), then the request is cut as the upstream's fault.
        expect(text.split('HTTP/1.1 103 Early Hints').length - 1).toBe(8);
        expect(text).toContain('HTTP/1.1 502 Bad Gateway');
        expect(text).toContain('limits.interim_responses');
      }
      const { maxGapMs, body } = await witness;
      expect(body).toContain('data: [DONE]');
      expect(maxGapMs).toBeLessThan(1_000);
      expect(await limitCount(sidecar.admin, 'interim_responses')).toBe(20);
      const grewMiB = rssMiB(sidecar.pid) - beforeRss;
      const cpu = cpuMs(sidecar.pid) - beforeCpu;
      process.stdout.write(`1xx flood cut: RSS +${grewMiB.toFixed(1)} MiB, CPU ${cpu.toFixed(0)} ms, witness max gap ${maxGapMs.toFixed(0)} ms\n`);
      expect(grewMiB).toBeLessThan(50);
      expect(cpu).toBeLessThan(1_500);
    } finally {
      await upstream.close();
    }
  }, 30_000);

  it('with the caps lifted, a client that does not read pauses the upstream: memory stays bounded, another stream flows', async () => {
    const upstream = await hostileUpstream(4_000);
    try {
      sidecar = await startSidecarProcess(upstream.url, { config: 'limits:\n  interim_responses: 100000000\n  interim_response_bytes: 100000000000\n' });
      await witnessStream(sidecar.proxy);
      const beforeRss = rssMiB(sidecar.pid);
      const { port } = new URL(sidecar.proxy);
      const reader = net.connect({ host: '127.0.0.1', port: Number(port) });
      reader.on('error', () => {});
      // Reads nothing: its receive window fills, then the sidecar's writes report backpressure.
      reader.pause();
      reader.write('GET /flood HTTP/1.1\r\nHost: x\r\n\r\n');
      await sleep(1_000);
      const { maxGapMs, body } = await witnessStream(sidecar.proxy);
      await sleep(2_000);
      const grewMiB = rssMiB(sidecar.pid) - beforeRss;
      reader.destroy();
      process.stdout.write(`1xx flood to a non-reading client: RSS +${grewMiB.toFixed(1)} MiB, witness max gap ${maxGapMs.toFixed(0)} ms\n`);
      // Before: 1-3 GB in 8 s (issue 13).
      expect(grewMiB).toBeLessThan(100);
      expect(body).toContain('data: [DONE]');
      expect(maxGapMs).toBeLessThan(1_000);
    } finally {
      await upstream.close();
    }
  }, 30_000);
});
