import http from 'node:http';
import { Samples } from './stats.js';

/**
 * The open-loop load generator: requests start on a fixed schedule whatever the earlier ones are
 * doing (a closed loop would slow down with the system and hide its tail latency), every
 * measurement is taken on the client, and every wait is bounded.
 *
 * Per-chunk delivery delay needs the simulator's `x-sim-stamp: 1`: each content token's text is
 * then the upstream's send time from `process.hrtime.bigint()` (CLOCK_MONOTONIC, shared by every
 * process on the machine) followed by a space, and the client subtracts it from its own receive time.
 */

export const STAMP_HEADER = 'x-sim-stamp';

export interface StreamLoad {
  readonly url: string;
  /** Target number of streams open at once; the arrival spacing is one stream's length divided by it. */
  readonly concurrency: number;
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly tokens: number;
  /** How long requests keep starting. */
  readonly arrivalMs: number;
  /** Hard cap on the number of requests (keeps small cells small). */
  readonly maxRequests: number;
  /** Ask the simulator to stamp each token with its send time. */
  readonly stamp: boolean;
  /** Keep every response body (correctness mode); request i gets seed i + 1 and x-request-id bench-i. */
  readonly keepBodies: boolean;
  /** After the last arrival, how long to wait for open requests before cutting them. */
  readonly drainTimeoutMs: number;
}

/**
 * Requests name one of this many models in turn (bench-model-0, -1, ...), so the sidecar's log line,
 * which carries no request id, can be told apart from its neighbours in time (accuracy.ts).
 */
export const MODEL_CYCLE = 16;

export interface ClientRequest {
  /** The model the request named (and the sidecar logs). */
  readonly model: string;
  /** performance.timeOrigin + performance.now() when the request was sent: pairs it with the sidecar's log line. */
  readonly startEpochMs: number;
  status: number;
  ttftMs: number;
  /** Send to the response's end. */
  e2eMs: number;
  tokens: number;
  /** (last token − first token) / (tokens − 1), as the sidecar defines TPOT. */
  tpotMs: number;
  ok: boolean;
  body: Buffer | undefined;
}

export interface StreamResult {
  readonly sent: number;
  readonly completed: number;
  readonly failed: number;
  readonly tokens: number;
  /** First request sent to last one finished. */
  readonly wallMs: number;
  readonly ttftMs: Samples;
  /** Client receive time − upstream send time, per content token (stamped runs only). */
  readonly deliveryDelayMs: Samples;
  /** Client-side gap between consecutive content events of a request. */
  readonly itlMs: Samples;
  readonly requests: ClientRequest[];
  /** Most requests open at once, as the client saw it. */
  readonly peakOpen: number;
  /** Status codes or error names of failed requests, with counts (for the failure message). */
  readonly failures: Record<string, number>;
}

const CONTENT = /"content":"([^"]*)"/g;

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/** Runs `launch(i)` for i in [0, count) at `spacingMs` intervals from now; resolves after the last launch. */
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

/** Resolves when `open()` reaches 0 or after `timeoutMs`; returns whether everything finished. */
async function drain(open: () => number, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (open() > 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  return open() === 0;
}

export function streamRequestBody(tokens: number, stream: boolean, model = 'sim-model'): string {
  return JSON.stringify({ model, messages: [{ role: 'user', content: 'Say something.' }], stream, max_tokens: tokens });
}

export async function runStreamLoad(load: StreamLoad): Promise<StreamResult> {
  const target = new URL('/v1/chat/completions', load.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
  const streamMs = load.ttftMs + load.tokens * load.itlMs;
  const spacingMs = streamMs / load.concurrency;
  const count = Math.max(1, Math.min(load.maxRequests, Math.ceil(load.arrivalMs / spacingMs)));
  const bodies = Array.from({ length: MODEL_CYCLE }, (_, i) => streamRequestBody(load.tokens, true, `bench-model-${i}`));
  const baseHeaders: Record<string, string> = {
    'content-type': 'application/json',
    'x-sim-ttft-ms': String(load.ttftMs),
    'x-sim-itl-ms': String(load.itlMs),
    'x-sim-output-tokens': String(load.tokens),
  };
  if (load.stamp) baseHeaders[STAMP_HEADER] = '1';

  const ttftMs = new Samples(count);
  const deliveryDelayMs = new Samples(load.stamp ? count * load.tokens : 16);
  const itlMs = new Samples(count * load.tokens);
  const requests: ClientRequest[] = [];
  const failures: Record<string, number> = {};
  const live = new Set<http.ClientRequest>();
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
    const body = bodies[index % MODEL_CYCLE] as string;
    const record: ClientRequest = {
      model: `bench-model-${index % MODEL_CYCLE}`,
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
    let carry = '';
    let firstNs = Number.NaN;
    let lastNs = Number.NaN;
    let finished = false;
    const done = (): void => {
      if (finished) return;
      finished = true;
      open--;
      live.delete(req);
      lastDoneMs = performance.now();
    };
    open++;
    if (open > peakOpen) peakOpen = open;
    const req = http.request(target, { method: 'POST', agent, headers }, (res) => {
      record.status = res.statusCode ?? 0;
      if (record.status !== 200) fail(record, `status ${record.status}`);
      res.on('data', (chunk: Buffer) => {
        const at = nowNs();
        if (load.keepBodies) parts.push(chunk);
        // Only whole SSE events are scanned: an event split across reads is kept until its end arrives.
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
          if (record.tokens === 0) {
            firstNs = at;
            record.ttftMs = (at - sendNs) / 1e6;
            ttftMs.push(record.ttftMs);
          } else {
            itlMs.push((at - lastNs) / 1e6);
          }
          lastNs = at;
          record.tokens++;
          if (load.stamp) deliveryDelayMs.push((at - Number(content.slice(0, content.indexOf(' ')))) / 1e6);
        }
      });
      res.on('end', () => {
        record.e2eMs = (nowNs() - sendNs) / 1e6;
        if (record.tokens !== load.tokens) fail(record, `tokens ${record.tokens}`);
        if (record.tokens > 1) record.tpotMs = (lastNs - firstNs) / 1e6 / (record.tokens - 1);
        tokens += record.tokens;
        if (load.keepBodies) record.body = Buffer.concat(parts);
        if (record.ok) completed++;
        done();
      });
      res.on('error', (error) => {
        fail(record, error.message);
        done();
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      fail(record, error.code ?? error.message);
      done();
    });
    live.add(req);
    req.setHeader('content-length', Buffer.byteLength(body));
    const sendNs = nowNs();
    if (Number.isNaN(firstSendMs)) firstSendMs = performance.now();
    req.end(body);
  };

  await schedule(count, spacingMs, launch);
  const drained = await drain(() => open, load.drainTimeoutMs);
  if (!drained) {
    for (const req of live) req.destroy(new Error('cut: not finished within the drain timeout'));
    await drain(() => open, 2000);
  }
  agent.destroy();
  return {
    sent: count,
    completed,
    failed,
    tokens,
    wallMs: lastDoneMs - firstSendMs,
    ttftMs,
    deliveryDelayMs,
    itlMs,
    requests,
    peakOpen,
    failures,
  };
}

export interface UnaryLoad {
  readonly url: string;
  readonly ratePerS: number;
  readonly durationMs: number;
  readonly drainTimeoutMs: number;
}

export interface UnaryResult {
  readonly sent: number;
  readonly completed: number;
  readonly failed: number;
  readonly wallMs: number;
  /** Send to last byte of the response. */
  readonly latencyMs: Samples;
  readonly failures: Record<string, number>;
}

/** Tiny non-streaming requests (one output token, no simulated delay) at a fixed rate. */
export async function runUnaryLoad(load: UnaryLoad): Promise<UnaryResult> {
  const target = new URL('/v1/chat/completions', load.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
  const count = Math.max(1, Math.round((load.ratePerS * load.durationMs) / 1000));
  const body = streamRequestBody(1, false);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'x-sim-ttft-ms': '0',
    'x-sim-output-tokens': '1',
  };
  const latencyMs = new Samples(count);
  const failures: Record<string, number> = {};
  const live = new Set<http.ClientRequest>();
  let open = 0;
  let completed = 0;
  let failed = 0;
  let firstSendMs = Number.NaN;
  let lastDoneMs = Number.NaN;

  const launch = (): void => {
    let finished = false;
    const finish = (why: string | undefined): void => {
      if (finished) return;
      finished = true;
      open--;
      live.delete(req);
      lastDoneMs = performance.now();
      if (why === undefined) {
        completed++;
        latencyMs.push(lastDoneMs - sentMs);
      } else {
        failed++;
        failures[why] = (failures[why] ?? 0) + 1;
      }
    };
    open++;
    const req = http.request(target, { method: 'POST', agent, headers }, (res) => {
      res.on('data', () => {});
      res.on('end', () => finish(res.statusCode === 200 ? undefined : `status ${res.statusCode}`));
      res.on('error', (error) => finish(error.message));
    });
    req.on('error', (error: NodeJS.ErrnoException) => finish(error.code ?? error.message));
    live.add(req);
    const sentMs = performance.now();
    if (Number.isNaN(firstSendMs)) firstSendMs = sentMs;
    req.end(body);
  };

  await schedule(count, 1000 / load.ratePerS, launch);
  if (!(await drain(() => open, load.drainTimeoutMs))) {
    for (const req of live) req.destroy(new Error('cut: not finished within the drain timeout'));
    await drain(() => open, 2000);
  }
  agent.destroy();
  return { sent: count, completed, failed, wallMs: lastDoneMs - firstSendMs, latencyMs, failures };
}

/**
 * Whether the simulator at `url` supports `x-sim-stamp` (it answers 400 to an unknown x-sim-*
 * header), checked with one tiny streamed request whose token must parse as a time.
 */
export async function simulatorStamps(url: string): Promise<boolean> {
  const response = await fetch(new URL('/v1/chat/completions', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', [STAMP_HEADER]: '1', 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '1' },
    body: streamRequestBody(1, true),
    signal: AbortSignal.timeout(5000),
  });
  const text = await response.text();
  if (response.status !== 200) return false;
  const content = [...text.matchAll(CONTENT)].map((m) => m[1] as string).find((c) => c !== '');
  return content !== undefined && /^\d+ $/.test(content);
}
