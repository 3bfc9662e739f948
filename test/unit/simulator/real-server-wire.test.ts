import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { parseSimulatorFlags } from '../../../src/simulator/options.js';
import { simulator } from './helpers.js';

/** The simulator imitates what real servers do on the wire, as options (test/fixtures/streams/*.wire.jsonl). */

/** One streamed chat request on a raw socket: every read with its time, and when the server closed. */
async function rawStream(url: string, headers: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  await new Promise((resolve) => socket.once('connect', resolve));
  const body = '{"model":"m","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}';
  const reads: Array<{ atMs: number; text: string }> = [];
  let closedAtMs: number | undefined;
  socket.on('data', (data: Buffer) => reads.push({ atMs: performance.now(), text: data.toString('latin1') }));
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('end', () => {
    closedAtMs = performance.now();
  });
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${headers}content-length: ${body.length}\r\n\r\n${body}`);
  const deadline = setTimeout(() => socket.destroy(), 2_000);
  await Promise.race([ended, new Promise((r) => setTimeout(r, 600))]);
  clearTimeout(deadline);
  socket.destroy();
  return { reads, closedAtMs, text: reads.map((r) => r.text).join('') };
}

describe('simulator: real servers on the wire', () => {
  it('--close-after-stream: announces Keep-Alive like llama-server, then closes right after the last chunk without Connection: close', async () => {
    const sim = await simulator({ closeAfterStream: true });
    const { text, closedAtMs, reads } = await rawStream(sim.url, '');
    expect(text).toMatch(/\r\nkeep-alive: timeout=5, max=100\r\n/i);
    expect(text).not.toMatch(/connection: close/i);
    expect(text.endsWith('data: [DONE]\n\n\r\n0\r\n\r\n')).toBe(true);
    expect(closedAtMs).toBeDefined();
    // Closed within a few ms of the terminator, not after a keep-alive timeout (generous for a loaded machine).
    expect((closedAtMs as number) - (reads.at(-1)?.atMs as number)).toBeLessThan(200);
  });

  it('keeps the connection by default', async () => {
    const sim = await simulator();
    const { closedAtMs, text } = await rawStream(sim.url, '');
    expect(text.endsWith('0\r\n\r\n')).toBe(true);
    expect(closedAtMs).toBeUndefined();
  });

  it('x-sim-terminator-delay-ms: writes the chunked terminator apart from [DONE], like uvicorn', async () => {
    const sim = await simulator();
    const { reads } = await rawStream(sim.url, 'x-sim-terminator-delay-ms: 400\r\n');
    const done = reads.findIndex((r) => r.text.includes('data: [DONE]'));
    const terminator = reads.findIndex((r) => r.text.includes('0\r\n\r\n'));
    expect(done).toBeGreaterThanOrEqual(0);
    expect(reads[done]!.text.endsWith('data: [DONE]\n\n\r\n')).toBe(true);
    expect(terminator).toBeGreaterThan(done);
    // Half the delay: a loaded machine may read [DONE] late and the terminator on time (CI: 126 ms
    // between them for a delay of 150).
    expect(reads[terminator]!.atMs - reads[done]!.atMs).toBeGreaterThanOrEqual(200);
  });

  it('reads --close-after-stream and --terminator-delay-ms', () => {
    expect(parseSimulatorFlags(['--close-after-stream', '--terminator-delay-ms', '0.1'])).toEqual({ closeAfterStream: true, terminatorDelayMs: 0.1 });
  });
});
