import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/simulator/server.js';
import { RawClient } from '../../helpers/raw-http.js';
import { cpuMs, limitCount, oneByteChunks, startSidecarProcess, witnessStream, type SidecarProcess } from './harness.js';

/** A 6 MB JSON chat body. */
function bigBody(): Buffer {
  const start = '{"model":"sim-model","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"';
  const end = '"}]}';
  return Buffer.from(start + 'x'.repeat(6_000_000 - start.length - end.length) + end);
}

/** The body as chunks of `size` bytes (1-byte chunks: 36 MB on the wire). */
function chunks(body: Buffer, size: number): Buffer {
  if (size === 1) return oneByteChunks(body);
  const parts: Buffer[] = [];
  const sizeLine = `${size.toString(16)}\r\n`;
  for (let at = 0; at < body.length; at += size) {
    const piece = body.subarray(at, at + size);
    parts.push(Buffer.from(piece.length === size ? sizeLine : `${piece.length.toString(16)}\r\n`, 'latin1'), piece, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

async function upload(sidecar: SidecarProcess, head: string, wire: Buffer): Promise<{ cpuMs: number; answer: string; witnessGapMs: number }> {
  const client = await RawClient.connect(sidecar.proxy);
  const before = cpuMs(sidecar.pid);
  const witness = witnessStream(sidecar.proxy, 60, 20);
  client.write(head);
  client.write(wire);
  const answer = await client.read((text) => text.includes('data: [DONE]') || /^HTTP\/1\.1 400 /.test(text), 30_000);
  const cpu = cpuMs(sidecar.pid) - before;
  const { maxGapMs } = await witness;
  client.close();
  return { cpuMs: cpu, answer, witnessGapMs: maxGapMs };
}

describe('request-body chunk overhead', () => {
  let simulator: RunningSimulator;
  beforeAll(async () => {
    simulator = await startSimulator({ port: 0, ttftMs: 5, itlMs: 5 });
  });
  afterAll(async () => {
    await simulator.close();
  });

  it('6 MB in 1-byte chunks is cut with 400 at once; in 100-byte chunks it costs little more than with a length; other streams keep their pace', async () => {
    const sidecar = await startSidecarProcess(simulator.url);
    try {
      const body = bigBody();
      await witnessStream(sidecar.proxy, 5, 5);
      const chunkedHead = 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
      const sized = await upload(sidecar, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body);
      const hundred = await upload(sidecar, chunkedHead, chunks(body, 100));
      const tiny = await upload(sidecar, chunkedHead, chunks(body, 1));
      process.stdout.write(
        `6 MB body: with a length ${sized.cpuMs.toFixed(0)} ms CPU (witness gap ${sized.witnessGapMs.toFixed(0)} ms); ` +
          `100-byte chunks ${hundred.cpuMs.toFixed(0)} ms (gap ${hundred.witnessGapMs.toFixed(0)} ms); 1-byte chunks ${tiny.cpuMs.toFixed(0)} ms (gap ${tiny.witnessGapMs.toFixed(0)} ms)\n`,
      );
      expect(sized.answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(hundred.answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(tiny.answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(tiny.answer).toContain('limits.min_request_chunk_bytes');
      expect(await limitCount(sidecar.admin, 'min_request_chunk_bytes')).toBe(1);
      // Before: 2-4 s of CPU for the 1-byte chunks and other streams stalled up to 990 ms (issue 13).
      expect(tiny.cpuMs).toBeLessThan(1_000);
      expect(hundred.cpuMs).toBeLessThan(1_500);
      expect(tiny.witnessGapMs).toBeLessThan(500);
      expect(hundred.witnessGapMs).toBeLessThan(500);
      const lines = sidecar.logs().filter((l) => l.msg === 'request' && l.status === 400);
      expect(lines.map((l) => l.outcome)).toEqual(['client_error']);
    } finally {
      sidecar.stop();
    }
  }, 60_000);
});
