import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createH2cServer, type Http2Server, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { TokentapError } from '../errors.js';
import { planGeneration } from './generation-plan.js';
import { serveTritonModelStreamInfer, serveVllmGenerate, type GrpcServiceContext } from './grpc-services.js';
import { GRPC_METHODS } from '../taps/grpc/engine-protos.js';
import { runGeneration, type GenerationEnd } from './generation-runner.js';
import { LoraAdapters } from './lora-adapters.js';
import { VllmServerMetrics } from './vllm-metrics.js';
import { randomHex } from './openai-protocol.js';
import { JSON_CONTENT_TYPE, detailBody, modelList } from './openai-wire.js';
import {
  SIM_HEADER,
  requestBehaviour,
  resolveSimulatorOptions,
  type SimulatorOptions,
  type SimulatorSettings,
} from './options.js';
import type { ErrorResponse, Protocol, RouteParams } from './protocol.js';
import { matchGenerationRoute } from './routes.js';

/**
 * The built-in inference server over node:http, standing in for a GPU server in the demo, the tests
 * and the benchmarks. It speaks every API in routes.ts (vLLM's OpenAI-compatible chat, completions
 * and Responses, Anthropic Messages, TGI, Ollama, llama.cpp, Triton), each in its own wire module,
 * plus GET /v1/models and GET /health. Timing, length, chunking and faults come from the options,
 * overridden per request by `x-sim-*` headers (options.ts), the same for every API.
 *
 * It runs on real timers, so its timestamps (`atMs`) come from `performance.now()`, the same
 * monotonic clock as the proxy's systemClock.
 */

export type RequestEnd = GenerationEnd | 'error-status' | 'server-closed';

export interface RequestClosedEvent {
  readonly path: string;
  /** Content tokens that reached the client. */
  readonly tokensSent: number;
  /** True iff the whole response, terminal event included, was sent. */
  readonly completed: boolean;
  /**
   * How it ended: `client-closed` also covers a stalled response the client gave up on;
   * `server-closed` is a response cut by close(); `errored` one ended by an `error:<n>` fault.
   */
  readonly end: RequestEnd;
  /** performance.now() when it ended. */
  readonly atMs: number;
}

export interface SimulatorEvents {
  /** A generation request ended, for whatever reason. */
  'request-closed': [RequestClosedEvent];
}

export interface SimulatorStats {
  /** Generation requests accepted (validation passed), including injected status faults. */
  readonly requests: number;
  /** Of those, the ones whose client went away before the response ended. */
  readonly clientAborts: number;
  readonly inFlight: number;
}

export interface RunningSimulator {
  /** e.g. http://127.0.0.1:8000, with the real port when started on port 0. */
  readonly url: string;
  readonly port: number;
  /** With `h2cPort`: e.g. http://127.0.0.1:8001, the HTTP/2 cleartext listener (prior knowledge); undefined without. */
  readonly h2cUrl: string | undefined;
  readonly events: EventEmitter<SimulatorEvents>;
  stats(): SimulatorStats;
  /** Stops listening and closes every open connection, streams included; safe to call again. */
  close(): Promise<void>;
}

/** uvicorn's default keep-alive (vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s). */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** Drops a client that never finishes its request headers; a legitimate one takes milliseconds. */
const HEADERS_TIMEOUT_MS = 30_000;
/** Far above any prompt a test sends; stops a runaway client from filling memory. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;
/** Reported by /v1/models; the simulator enforces no context limit. */
const MAX_MODEL_LEN = 8192;

function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'content-type': JSON_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: ServerResponse, status: number, error: ErrorResponse): void {
  res.writeHead(status, { 'content-type': error.contentType, 'content-length': Buffer.byteLength(error.body) });
  res.end(error.body);
}


type Body = { readonly text: string } | { readonly failure: 'too-large' | 'aborted' };

function readBody(req: IncomingMessage): Promise<Body> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (part: Buffer) => {
      size += part.length;
      if (size <= MAX_BODY_BYTES) parts.push(part);
    });
    req.on('end', () =>
      resolve(size <= MAX_BODY_BYTES ? { text: Buffer.concat(parts).toString('utf8') } : { failure: 'too-large' }),
    );
    req.on('error', () => resolve({ failure: 'aborted' }));
  });
}

/**
 * Starts a simulator listening on `options.host`:`options.port` (127.0.0.1:8000 by default; port 0
 * picks a free one). Rejects with TOKENTAP_ERR_CONFIG_INVALID for bad options and
 * TOKENTAP_ERR_LISTEN when the address cannot be bound.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const settings = resolveSimulatorOptions(options);
  const events = new EventEmitter<SimulatorEvents>();
  let requests = 0;
  let clientAborts = 0;
  let inFlight = 0;
  let nextSeed = 1;
  let closing = false;
  const engineMetrics = new VllmServerMetrics(settings.model);
  const loras = new LoraAdapters(settings.loras, settings.loraLoadMs, settings.loraUnloadAfterMs, performance.now());

  const finished = (path: string, how: RequestEnd, tokensSent: number): void => {
    const end = how === 'client-closed' && closing ? 'server-closed' : how;
    inFlight -= 1;
    if (end === 'client-closed') clientAborts += 1;
    events.emit('request-closed', { path, tokensSent, completed: end === 'completed', end, atMs: performance.now() });
  };

  const generate = async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    protocol: Protocol,
    params: RouteParams,
  ): Promise<void> => {
    const body = await readBody(req);
    const startMs = performance.now();
    if ('failure' in body) {
      if (body.failure === 'too-large') {
        const message = `Request body larger than ${MAX_BODY_BYTES} bytes`;
        // Starlette's reason phrase, which vLLM reports as the type.
        sendError(res, 413, protocol.errorResponse(413, message, { status: 413, message, type: 'Request Entity Too Large' }));
      }
      return;
    }
    const resolved = requestBehaviour(settings.behaviour, req.headers);
    if ('problems' in resolved) {
      const message = resolved.problems.map((problem) => problem.message).join('; ');
      const problem = { status: 400, message, type: 'BadRequestError', param: resolved.problems[0]?.header ?? null };
      sendError(res, 400, protocol.errorResponse(400, message, problem));
      return;
    }
    const parsed = protocol.parse(body.text, params);
    if ('problem' in parsed) {
      const { problem } = parsed;
      sendError(res, problem.status, protocol.errorResponse(problem.status, problem.message, problem));
      return;
    }

    const { request } = parsed;
    const loadMs = loras.loadDelayMs(request.model ?? settings.model, startMs);
    // An unloaded adapter's weights load before its prefill: the first token comes that much later.
    const behaviour = loadMs === 0 ? resolved.behaviour : { ...resolved.behaviour, ttftMs: resolved.behaviour.ttftMs + loadMs };
    requests += 1;
    inFlight += 1;
    if (behaviour.fault.kind === 'status') {
      const { status } = behaviour.fault;
      sendError(res, status, protocol.errorResponse(status, `Simulated failure (${SIM_HEADER.fault}: status:${status})`));
      finished(path, 'error-status', 0);
      return;
    }

    const requestId = req.headers['x-request-id'];
    const writer = protocol.respond(
      request,
      {
        requestId: typeof requestId === 'string' ? requestId : undefined,
        model: request.model ?? settings.model,
        behaviour,
        promptTokens: request.promptTokens,
        startMs,
      },
      params,
    );
    // A known knee (capacity tests): past it, every new request waits longer for its first token.
    const ttftMs = behaviour.kneeInFlight > 0 && inFlight > behaviour.kneeInFlight ? behaviour.pastKneeTtftMs : behaviour.ttftMs;
    const plan = planGeneration({
      outputTokens: behaviour.outputTokens,
      maxTokens: request.maxTokens,
      tokensPerChunk: behaviour.tokensPerChunk,
      ttftMs,
      itlMs: behaviour.itlMs,
      jitterMs: behaviour.jitterMs,
      fault: behaviour.fault,
      seed: behaviour.seed ?? nextSeed++,
    });
    engineMetrics.started(request.promptTokens);
    const reportedPrefillMs = behaviour.enginePrefillMs === 'measured' ? Math.max(0, ttftMs - behaviour.engineQueueMs) : behaviour.enginePrefillMs;
    runGeneration(
      res,
      plan,
      writer,
      {
        stream: request.stream,
        stamp: behaviour.stamp,
        keepAliveMs: behaviour.keepAliveMs,
        closeAfterStream: behaviour.closeAfterStream,
        terminatorDelayMs: behaviour.terminatorDelayMs,
        startMs,
        serverError: () => protocol.errorResponse(500, `Simulated failure (${SIM_HEADER.fault}: error)`),
      },
      (end, tokensSent) => {
        engineMetrics.finished(behaviour.engineQueueMs, reportedPrefillMs);
        finished(path, end, tokensSent);
      },
    );
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const method = req.method ?? 'GET';
    const route = matchGenerationRoute(path);
    if (route !== undefined) {
      if (method === 'POST') void generate(req, res, path, route.protocol, route.params);
      else sendJson(res, 405, detailBody('Method Not Allowed'), { allow: 'POST' });
      return;
    }
    if (path === '/metrics' && method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(engineMetrics.text());
      return;
    }
    if (path !== '/v1/models' && path !== '/health') {
      sendJson(res, 404, detailBody('Not Found'));
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      sendJson(res, 405, detailBody('Method Not Allowed'), { allow: 'GET, HEAD' });
      return;
    }
    if (path === '/health') {
      // vLLM answers Response(status_code=200): no body, no content type.
      res.writeHead(200, { 'content-length': '0' });
      res.end();
      return;
    }
    const created = Math.floor(Date.now() / 1000);
    sendJson(res, 200, modelList(settings.model, settings.loras, created, () => `modelperm-${randomHex()}`, MAX_MODEL_LEN));
  };

  const grpcContext: GrpcServiceContext = {
    behaviour: settings.behaviour,
    nextSeed: () => nextSeed++,
    started: () => {
      requests += 1;
      inFlight += 1;
    },
    finished,
  };

  /**
   * h2c: gRPC calls (content type `application/grpc`) to the two services, everything else to the
   * HTTP handler through node:http2's compatibility request and response, which the HTTP APIs use
   * as they use node:http's (generation-runner.ts resets the stream, never the connection).
   */
  const handleH2c = (req: Http2ServerRequest, res: Http2ServerResponse): void => {
    const contentType = req.headers['content-type'];
    if (contentType !== undefined && /^application\/grpc(?:\+proto)?(?:;|$)/i.test(contentType)) {
      const path = req.headers[':path'];
      // The compatibility response sends its own (empty) trailers when the stream wants them;
      // a gRPC call answers with the raw stream and sends its grpc-status itself.
      res.stream.removeAllListeners('wantTrailers');
      if (path === GRPC_METHODS.vllmGenerate) serveVllmGenerate(res.stream, req.headers, grpcContext);
      else if (path === GRPC_METHODS.tritonModelStreamInfer) serveTritonModelStreamInfer(res.stream, req.headers, grpcContext);
      else {
        res.stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': 'Method not found' }, { endStream: true });
        req.resume();
      }
      return;
    }
    handle(req as unknown as IncomingMessage, res as unknown as ServerResponse);
  };

  const server = createServer(
    { noDelay: true, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, headersTimeout: HEADERS_TIMEOUT_MS },
    handle,
  );
  const port = await listen(server, settings, settings.port);
  const h2c = settings.h2cPort === undefined ? undefined : createH2cServer(handleH2c);
  const h2cSessions = new Set<ServerHttp2Session>();
  h2c?.on('session', (session) => {
    h2cSessions.add(session);
    session.once('close', () => h2cSessions.delete(session));
  });
  let h2cPort: number | undefined;
  try {
    if (h2c !== undefined) h2cPort = await listen(h2c, settings, settings.h2cPort as number);
  } catch (error) {
    server.close();
    throw error;
  }
  let closed: Promise<void> | undefined;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;

  return {
    url: `http://${host}:${port}`,
    port,
    h2cUrl: h2cPort === undefined ? undefined : `http://${host}:${h2cPort}`,
    events,
    stats: () => ({ requests, clientAborts, inFlight }),
    close: () => {
      closed ??= Promise.all([
        new Promise<void>((resolve, reject) => {
          closing = true;
          server.close((error) => (error === undefined ? resolve() : reject(error)));
          server.closeAllConnections();
        }),
        h2c === undefined ? undefined : closeH2c(h2c, h2cSessions),
      ]).then(() => undefined);
      return closed;
    },
  };
}

/** Stops listening and destroys every session, streams included (node:http2 has no closeAllConnections). */
function closeH2c(server: Http2Server, sessions: ReadonlySet<ServerHttp2Session>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.close((error) => (error === undefined ? resolve() : reject(error)));
    for (const session of sessions) session.destroy();
  });
}

function listen(server: Server | Http2Server, settings: SimulatorSettings, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => {
      reject(new TokentapError('TOKENTAP_ERR_LISTEN', [`simulator ${settings.host}:${port}: ${error.message}`]));
    };
    server.once('error', onError);
    server.listen(port, settings.host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
