import http2 from 'node:http2';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { MODEL_CYCLE, STAMP_HEADER, streamRequestBody, type ClientRequest, type StreamResult } from './load.js';
import { repoRoot } from './processes.js';
import { Samples } from './stats.js';

/**
 * The open-loop load generator of the HTTP/2 cleartext cells (load.ts's schedule, measurements and
 * bounds), on node:http2 client sessions opened with prior knowledge:
 *
 * - `grpc`: vLLM `VllmEngine/Generate` calls, the request encoded and each response message decoded
 *   by protobufjs from the in-tree proto (src/taps/grpc/proto/smg/vllm_engine.proto). Written on
 *   node:http2 rather than @grpc/grpc-js so that the client side is the same codec as the SSE cell's
 *   and as light as the HTTP/1.1 generator (grpc-js adds its channel, filters and per-call objects);
 *   either way its CPU is spent in this process, never in the measured one. A call counts as
 *   completed when its trailers carry `grpc-status: 0` and its chunks carried exactly the requested
 *   number of `token_ids`. With `x-sim-stamp` the simulator makes a chunk's token ids its send
 *   time in microseconds modulo 2^32 (its `Generate` has no text to stamp): the delivery delay is
 *   the receive time minus that, modulo 2^32.
 * - `sse`: OpenAI chat completions streamed as SSE, parsed as load.ts parses them, with
 *   `x-sim-stamp` for the per-chunk delivery delay.
 */

export type H2Kind = 'grpc' | 'sse';

export const VLLM_GENERATE_PATH = '/vllm.grpc.engine.VllmEngine/Generate';

export interface H2StreamLoad {
  readonly kind: H2Kind;
  /** http://host:port of an HTTP/2 cleartext listener. */
  readonly url: string;
  /** HTTP/2 connections the streams are spread over, in turn. */
  readonly sessions: number;
  readonly concurrency: number;
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly tokens: number;
  readonly arrivalMs: number;
  readonly maxRequests: number;
  /** Ask the simulator to stamp each chunk with its send time. */
  readonly stamp: boolean;
  readonly keepBodies: boolean;
  readonly drainTimeoutMs: number;
}

const CONTENT = /"content":"([^"]*)"/g;
/** A gRPC stamp is a uint32 of microseconds. */
const STAMP_WRAP = 2 ** 32;

let vllmTypes: { request: protobuf.Type; response: protobuf.Type } | undefined;

function vllm(): { request: protobuf.Type; response: protobuf.Type } {
  if (vllmTypes === undefined) {
    const root = new protobuf.Root();
    root.loadSync(join(repoRoot(), 'src', 'taps', 'grpc', 'proto', 'smg', 'vllm_engine.proto'), { keepCase: true });
    root.resolveAll();
    vllmTypes = { request: root.lookupType('vllm.grpc.engine.GenerateRequest'), response: root.lookupType('vllm.grpc.engine.GenerateResponse') };
  }
  return vllmTypes;
}

/** One length-prefixed gRPC message (uncompressed). */
function grpcFrame(message: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

function schedule(count: number, spacingMs: number, launch: (index: number) => void): Promise<void> {
  const t0 = performance.now();
  let next = 0;
  return new Promise((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      while (next < count && t0 + next * spacingMs <= now) launch(next++);
      if (next >= count) {
        resolve();
        return;
      }
      setTimeout(tick, Math.max(0, t0 + next * spacingMs - performance.now()));
    };
    tick();
  });
}

async function drain(open: () => number, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (open() > 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  return open() === 0;
}

function connect(url: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no HTTP/2 session with ${url} within 5 s`));
    }, 5000);
    session.once('connect', () => {
      clearTimeout(timer);
      resolve(session);
    });
    session.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

export async function runH2StreamLoad(load: H2StreamLoad): Promise<StreamResult> {
  const sessions = await Promise.all(Array.from({ length: load.sessions }, () => connect(load.url)));
  // A session error after connect fails its open streams (their 'error'); nothing else to do here.
  for (const session of sessions) session.on('error', () => {});
  const streamMs = load.ttftMs + load.tokens * load.itlMs;
  const spacingMs = streamMs / load.concurrency;
  const count = Math.max(1, Math.min(load.maxRequests, Math.ceil(load.arrivalMs / spacingMs)));
  const stamp = load.stamp;
  const baseHeaders: Record<string, string> = {
    ':method': 'POST',
    ':path': load.kind === 'grpc' ? VLLM_GENERATE_PATH : '/v1/chat/completions',
    'content-type': load.kind === 'grpc' ? 'application/grpc' : 'application/json',
    'x-sim-ttft-ms': String(load.ttftMs),
    'x-sim-itl-ms': String(load.itlMs),
    'x-sim-output-tokens': String(load.tokens),
  };
  if (load.kind === 'grpc') baseHeaders['te'] = 'trailers';
  if (stamp) baseHeaders[STAMP_HEADER] = '1';
  const bodies =
    load.kind === 'grpc'
      ? [grpcFrame(vllm().request.encode(vllm().request.fromObject({ text: 'Say something.', sampling_params: { max_tokens: load.tokens }, stream: true })).finish())]
      : Array.from({ length: MODEL_CYCLE }, (_, i) => Buffer.from(streamRequestBody(load.tokens, true, `bench-model-${i}`)));

  const ttftMs = new Samples(count);
  const deliveryDelayMs = new Samples(stamp ? count * load.tokens : 16);
  const itlMs = new Samples(count * load.tokens);
  const requests: ClientRequest[] = [];
  const failures: Record<string, number> = {};
  const live = new Set<http2.ClientHttp2Stream>();
  let open = 0;
  let peakOpen = 0;
  let completed = 0;
  let failed = 0;
  let tokens = 0;
  let firstSendMs = Number.NaN;
  let lastDoneMs = Number.NaN;

  const fail = (record: ClientRequest, why: string): void => {
    if (!record.ok) return;
    record.ok = false;
    failed++;
    failures[why] = (failures[why] ?? 0) + 1;
  };

  const launch = (index: number): void => {
    const headers = load.keepBodies ? { ...baseHeaders, 'x-sim-seed': String(index + 1), 'x-request-id': `bench-${index}` } : baseHeaders;
    const body = bodies[index % bodies.length] as Buffer;
    const record: ClientRequest = {
      model: load.kind === 'grpc' ? '' : `bench-model-${index % MODEL_CYCLE}`,
      startEpochMs: performance.timeOrigin + performance.now(),
      status: 0,
      ttftMs: Number.NaN,
      e2eMs: Number.NaN,
      tokens: 0,
      tpotMs: Number.NaN,
      ok: true,
      body: undefined,
    };
    requests.push(record);
    const parts: Buffer[] = [];
    let pending: Buffer = Buffer.alloc(0);
    let carry = '';
    let firstNs = Number.NaN;
    let lastNs = Number.NaN;
    let grpcStatus: string | undefined;
    let finished = false;
    const token = (at: number, count: number): void => {
      if (record.tokens === 0) {
        firstNs = at;
        record.ttftMs = (at - sendNs) / 1e6;
        ttftMs.push(record.ttftMs);
      } else {
        itlMs.push((at - lastNs) / 1e6);
      }
      lastNs = at;
      record.tokens += count;
    };
    const onGrpcData = (chunk: Buffer, at: number): void => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 5) {
        const length = pending.readUInt32BE(1);
        if (pending.length < 5 + length) break;
        const message = vllm().response.decode(pending.subarray(5, 5 + length)) as { chunk?: { token_ids?: number[] } | null };
        pending = pending.subarray(5 + length);
        const ids = message.chunk?.token_ids;
        if (ids === undefined || ids.length === 0) continue;
        token(at, ids.length);
        if (stamp) deliveryDelayMs.push((((Math.floor(at / 1000) - (ids[0] as number)) % STAMP_WRAP) + STAMP_WRAP) % STAMP_WRAP / 1000);
      }
    };
    const onSseData = (chunk: Buffer, at: number): void => {
      const text = carry + chunk.toString('latin1');
      const end = text.lastIndexOf('\n\n');
      if (end === -1) {
        carry = text;
        return;
      }
      carry = text.slice(end + 2);
      CONTENT.lastIndex = 0;
      for (let match = CONTENT.exec(text); match !== null && match.index < end; match = CONTENT.exec(text)) {
        const content = match[1] as string;
        if (content === '') continue;
        token(at, 1);
        if (stamp) deliveryDelayMs.push((at - Number(content.slice(0, content.indexOf(' ')))) / 1e6);
      }
    };
    open++;
    if (open > peakOpen) peakOpen = open;
    const session = sessions[index % sessions.length] as http2.ClientHttp2Session;
    const req = session.request({ ...headers, 'content-length': String(body.length) });
    const done = (): void => {
      if (finished) return;
      finished = true;
      open--;
      live.delete(req);
      lastDoneMs = performance.now();
    };
    req.on('response', (responseHeaders) => {
      record.status = Number(responseHeaders[':status']);
      if (record.status !== 200) fail(record, `status ${record.status}`);
      // A trailers-only gRPC answer carries its status in the headers.
      if (responseHeaders['grpc-status'] !== undefined) grpcStatus = String(responseHeaders['grpc-status']);
    });
    req.on('trailers', (trailers) => {
      grpcStatus = String(trailers['grpc-status']);
    });
    req.on('data', (chunk: Buffer) => {
      const at = nowNs();
      if (load.keepBodies) parts.push(chunk);
      if (load.kind === 'grpc') onGrpcData(chunk, at);
      else onSseData(chunk, at);
    });
    req.on('end', () => {
      record.e2eMs = (nowNs() - sendNs) / 1e6;
      if (load.kind === 'grpc' && grpcStatus !== '0') fail(record, `grpc-status ${grpcStatus ?? 'missing'}`);
      if (record.tokens !== load.tokens) fail(record, `tokens ${record.tokens}`);
      if (record.tokens > 1) record.tpotMs = (lastNs - firstNs) / 1e6 / (record.tokens - 1);
      tokens += record.tokens;
      if (load.keepBodies) record.body = Buffer.concat(parts);
      if (record.ok) completed++;
      done();
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      fail(record, error.code ?? error.message);
      done();
    });
    req.on('close', () => {
      if (!finished) {
        fail(record, `stream closed (rst code ${req.rstCode})`);
        done();
      }
    });
    live.add(req);
    const sendNs = nowNs();
    if (Number.isNaN(firstSendMs)) firstSendMs = performance.now();
    req.end(body);
  };

  try {
    await schedule(count, spacingMs, launch);
    if (!(await drain(() => open, load.drainTimeoutMs))) {
      for (const req of live) req.destroy(new Error('cut: not finished within the drain timeout'));
      await drain(() => open, 2000);
    }
  } finally {
    for (const session of sessions) session.destroy();
  }
  return { sent: count, completed, failed, tokens, wallMs: lastDoneMs - firstSendMs, ttftMs, deliveryDelayMs, itlMs, requests, peakOpen, failures };
}
