import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/simulator/index.js';
import { FLAG, FRAME, frame, headerBlock, RawH2Client } from '../helpers/h2-frames.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';

/**
 * A client that leaves before it has sent its whole request: the server could not have answered a
 * request it never had, so the time the client spent not sending is not the server's. A review found
 * such a request judged as a request abandoned for slowness: a client that sent the head and part
 * of the body, waited past the TTFT threshold and closed counted a bad TTFT event (and a bad e2e
 * event), and a failure in its band of tokentap_time_to_first_token_failed_by_concurrency_total. So
 * any client could burn a workload's SLO and page on-call, and make a band look broken, with
 * requests the server never received.
 */
const CONFIG = `
workloads:
  - name: chat
    match: { header: { x-workload: chat } }
    slo: { objective: 0.99, ttft: 200ms, e2e: 300ms }
`;

const BODY = JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });

let simulator: RunningSimulator;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;

beforeAll(async () => {
  simulator = await startSimulator({ port: 0, ttftMs: 20, itlMs: 5, outputTokens: 4 });
  sidecar = await startTestSidecar(simulator.url, CONFIG);
});

afterAll(async () => {
  await sidecar?.close();
  await simulator?.close();
});

/** Sends the head and `sentBytes` of the body, then closes after `leaveAfterMs` without the rest. */
async function leaveMidBody(sentBytes: number, leaveAfterMs: number): Promise<void> {
  const { hostname, port } = new URL(sidecar.proxyUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  socket.on('error', () => {});
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-workload: chat\r\ncontent-type: application/json\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY.slice(0, sentBytes)}`);
  await new Promise((resolve) => setTimeout(resolve, leaveAfterMs));
  socket.destroy();
}

describe('SLO events of a request its client left before sending all of it', () => {
  it('counts no TTFT or e2e event and no failure in its band: a client that sends half its body, waits four times the TTFT threshold and leaves', async () => {
    await leaveMidBody(Math.floor(BODY.length / 2), 800);
    const m = await eventually('the request recorded', () => scrape(sidecar.adminUrl), (x) => sumValues(x, 'tokentap_requests_total', { workload: 'chat' }) === 1, 10_000);
    expect(sumValues(m, 'tokentap_requests_total', { workload: 'chat', outcome: 'client_cancelled' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft' })).toBe(0);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'e2e' })).toBe(0);
    expect(sumValues(m, 'tokentap_time_to_first_token_failed_by_concurrency_total', { workload: 'chat' })).toBe(0);
  });

  it('counts none over HTTP/2 either: a stream that sends half its body, waits four times the TTFT threshold and is reset', async () => {
    const before = await scrape(sidecar.adminUrl);
    const cancelledBefore = sumValues(before, 'tokentap_requests_total', { workload: 'chat', outcome: 'client_cancelled' });
    const client = await RawH2Client.connect(sidecar.proxyUrl);
    const head = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':path', '/v1/chat/completions'], [':authority', 'tokentap.test'], ['x-workload', 'chat'], ['content-type', 'application/json']]);
    client.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, head), frame(FRAME.DATA, 0, 1, Buffer.from(BODY.slice(0, Math.floor(BODY.length / 2)), 'latin1'))]));
    await new Promise((resolve) => setTimeout(resolve, 800));
    // RST_STREAM CANCEL with no END_STREAM before it, as curl and browsers cancel.
    const cancel = Buffer.alloc(4);
    cancel.writeUInt32BE(0x8);
    client.write(frame(FRAME.RST_STREAM, 0, 1, cancel));
    const m = await eventually('the stream recorded', () => scrape(sidecar.adminUrl), (x) => sumValues(x, 'tokentap_requests_total', { workload: 'chat', outcome: 'client_cancelled' }) === cancelledBefore + 1, 10_000);
    for (const slo of ['ttft', 'e2e']) {
      expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo })).toBe(sumValues(before, 'tokentap_slo_events_total', { workload: 'chat', slo }));
    }
    expect(sumValues(m, 'tokentap_time_to_first_token_failed_by_concurrency_total', { workload: 'chat' })).toBe(sumValues(before, 'tokentap_time_to_first_token_failed_by_concurrency_total', { workload: 'chat' }));
    client.socket.destroy();
  });

  it('still counts a bad TTFT event and a band failure for a client that sent its whole request and left after the threshold with no token', async () => {
    const before = await scrape(sidecar.adminUrl);
    const requestsBefore = sumValues(before, 'tokentap_requests_total', { workload: 'chat' });
    const { hostname, port } = new URL(sidecar.proxyUrl);
    const socket = net.connect({ host: hostname, port: Number(port) });
    socket.on('error', () => {});
    await new Promise((resolve) => socket.once('connect', resolve));
    // The simulator holds its first token for 5 s; the client gives up after 800 ms.
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-workload: chat\r\nx-sim-ttft-ms: 5000\r\ncontent-type: application/json\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY}`);
    await new Promise((resolve) => setTimeout(resolve, 800));
    socket.destroy();
    const m = await eventually('the request recorded', () => scrape(sidecar.adminUrl), (x) => sumValues(x, 'tokentap_requests_total', { workload: 'chat' }) === requestsBefore + 1, 10_000);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft', result: 'bad' }) - sumValues(before, 'tokentap_slo_events_total', { workload: 'chat', slo: 'ttft', result: 'bad' })).toBe(1);
    expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'chat', slo: 'e2e', result: 'bad' }) - sumValues(before, 'tokentap_slo_events_total', { workload: 'chat', slo: 'e2e', result: 'bad' })).toBe(1);
    expect(sumValues(m, 'tokentap_time_to_first_token_failed_by_concurrency_total', { workload: 'chat' }) - sumValues(before, 'tokentap_time_to_first_token_failed_by_concurrency_total', { workload: 'chat' })).toBe(1);
  });
});
