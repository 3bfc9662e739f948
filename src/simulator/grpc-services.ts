import type { IncomingHttpHeaders } from 'node:http';
import { constants, type ServerHttp2Stream } from 'node:http2';
import { ENGINE_PROTOS, GRPC_METHODS } from '../taps/grpc/engine-protos.js';
import { GrpcFrameDecoder } from '../taps/grpc/grpc-frame-decoder.js';
import { planGeneration, type ChunkStep, type GenerationPlan, type Step } from './generation-plan.js';
import type { GenerationEnd } from './generation-runner.js';
import { requestBehaviour, SIM_HEADER, type Behaviour, type RequestBehaviour } from './options.js';

/**
 * The simulator's gRPC services over h2c, written with node:http2 and protobufjs from the engines'
 * own protos (taps/grpc/proto/), with the timing, chunking and faults of its HTTP APIs
 * (`x-sim-*` metadata, options.ts):
 *
 * - vLLM `vllm.grpc.engine.VllmEngine/Generate` (server streaming): one `chunk` per step with its
 *   `token_ids` and the cumulative `prompt_tokens`/`completion_tokens`, then `complete`, then
 *   `grpc-status: 0` in the trailers, as smg-grpc-servicer answers.
 * - Triton `inference.GRPCInferenceService/ModelStreamInfer` (bidirectional): each request
 *   (`text_input`, optional `max_tokens` INT32) answered by one response per step carrying
 *   `text_output` (BYTES) and `output_ids` (INT32, [1, 1, tokens]), as TensorRT-LLM's backend
 *   streams; requests on one stream are answered in turn, and the call ends OK once the client has
 *   half-closed and every request is answered. With the request parameter
 *   `triton_enable_empty_final_response`, each request ends with an empty response flagged
 *   `triton_final_response`.
 *
 * Faults: `status:<n>` answers a vLLM call trailers-only with the gRPC code of that HTTP status
 * (grpcCodeOfHttpStatus) and a Triton request with an in-stream `error_message`; `error:<n>` ends a
 * vLLM call with INTERNAL after n tokens, and a Triton request with `error_message`; `reset:<n>`
 * resets the stream (RST_STREAM INTERNAL_ERROR), never the connection; `truncate:<n>` ends the
 * stream without trailers; `stall:<n>` sends nothing more. Token ids are positions (1000 + index):
 * the simulator has no tokenizer; with `x-sim-stamp`, a vLLM chunk's are its send time
 * (stampedTokenIds).
 */

/** gRPC's default maximum message size (grpc-js and grpcio alike); a larger request is refused. */
const MAX_REQUEST_MESSAGE_BYTES = 4 * 1024 * 1024;
const FIRST_TOKEN_ID = 1000;

const STATUS = { OK: 0, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14, UNKNOWN: 2 } as const;

/** The gRPC code a server sends for an HTTP status (the inverse of grpc's doc/http-grpc-status-mapping.md, as vLLM's servicer maps its errors). */
export function grpcCodeOfHttpStatus(status: number): number {
  if (status === 400 || status === 422) return STATUS.INVALID_ARGUMENT;
  if (status === 429) return STATUS.RESOURCE_EXHAUSTED;
  if (status === 503 || status === 502) return STATUS.UNAVAILABLE;
  if (status === 504 || status === 408) return STATUS.DEADLINE_EXCEEDED;
  if (status === 501) return STATUS.UNIMPLEMENTED;
  if (status >= 500) return STATUS.INTERNAL;
  return STATUS.UNKNOWN;
}

const VLLM_REQUEST = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateRequest');
const VLLM_RESPONSE = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateResponse');
const TRITON_REQUEST = ENGINE_PROTOS.triton.lookupType('inference.ModelInferRequest');
const TRITON_RESPONSE = ENGINE_PROTOS.triton.lookupType('inference.ModelStreamInferResponse');

export const GRPC_SERVICE_PATHS: readonly string[] = [GRPC_METHODS.vllmGenerate, GRPC_METHODS.tritonModelStreamInfer];

/** What a gRPC call shares with the simulator: its settings, seeds and request accounting. */
export interface GrpcServiceContext {
  readonly behaviour: Behaviour;
  nextSeed(): number;
  /** A generation was accepted (after validation), as the HTTP APIs count them. */
  started(): void;
  /** It ended: once per started(). */
  finished(path: string, end: GenerationEnd | 'error-status', tokensSent: number): void;
}

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

function trailersOnly(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed) return;
  stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeURIComponent(message) }, { endStream: true });
}

/**
 * Plays `plan` from `startMs`: at most one timer, armed for the next step's absolute target, as
 * generation-runner.ts does for the HTTP APIs. Returns a cancel function.
 */
function play(plan: GenerationPlan, startMs: number, perform: (step: Step) => boolean): () => void {
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  const runDue = (): void => {
    timer = undefined;
    for (;;) {
      const step = plan.steps[next];
      if (step === undefined) return; // a stall: nothing more until the client leaves
      const waitMs = startMs + step.atMs - performance.now();
      if (waitMs > 0) {
        timer = setTimeout(runDue, Math.max(1, waitMs));
        return;
      }
      next += 1;
      if (!perform(step)) return;
    }
  };
  runDue();
  return () => clearTimeout(timer);
}

function tokenIds(step: ChunkStep): number[] {
  return Array.from({ length: step.tokens }, (_, i) => FIRST_TOKEN_ID + step.first + i);
}

/**
 * `x-sim-stamp` for vLLM `Generate`, whose chunks carry no text: every token id of the chunk is its
 * send time, `process.hrtime.bigint()` (CLOCK_MONOTONIC) in microseconds modulo 2^32 (a uint32
 * field; it wraps every 71 minutes, so a client takes its own receive time minus the stamp modulo
 * 2^32). The counts stay those of the plan.
 */
function stampedTokenIds(step: ChunkStep): number[] {
  const stamp = Number((process.hrtime.bigint() / 1000n) & 0xffffffffn);
  return new Array<number>(step.tokens).fill(stamp);
}

/** Reads a unary call's request message: the whole body, its one message, bounded. */
function readUnaryMessage(stream: ServerHttp2Stream, done: (message: Buffer | string) => void): void {
  const parts: Buffer[] = [];
  let size = 0;
  stream.on('data', (part: Buffer) => {
    size += part.length;
    if (size <= MAX_REQUEST_MESSAGE_BYTES + 5) parts.push(part);
  });
  stream.on('end', () => {
    if (size > MAX_REQUEST_MESSAGE_BYTES + 5) return done(`request larger than ${MAX_REQUEST_MESSAGE_BYTES} bytes`);
    const body = Buffer.concat(parts);
    if (body.length < 5) return done('no request message');
    if (body[0] !== 0) return done('compressed requests are not supported');
    const length = body.readUInt32BE(1);
    if (body.length !== 5 + length) return done('expected exactly one request message');
    done(body.subarray(5));
  });
}

function behaviourOf(context: GrpcServiceContext, headers: IncomingHttpHeaders): RequestBehaviour | string {
  const resolved = requestBehaviour(context.behaviour, headers);
  if ('problems' in resolved) return resolved.problems.map((problem) => problem.message).join('; ');
  return resolved.behaviour;
}

/** vLLM `VllmEngine/Generate`. */
export function serveVllmGenerate(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, context: GrpcServiceContext): void {
  const path = GRPC_METHODS.vllmGenerate;
  readUnaryMessage(stream, (message) => {
    const startMs = performance.now();
    if (typeof message === 'string') return trailersOnly(stream, STATUS.INVALID_ARGUMENT, message);
    let request: { tokenized?: { input_ids?: number[] } | null; text?: string; sampling_params?: { max_tokens?: number } | null };
    try {
      request = VLLM_REQUEST.decode(message) as typeof request;
    } catch (error) {
      return trailersOnly(stream, STATUS.INVALID_ARGUMENT, `GenerateRequest does not parse: ${(error as Error).message}`);
    }
    const behaviour = behaviourOf(context, headers);
    if (typeof behaviour === 'string') return trailersOnly(stream, STATUS.INVALID_ARGUMENT, behaviour);
    const promptTokens = request.tokenized?.input_ids?.length ?? (request.text ?? '').split(/\s+/).filter((word) => word !== '').length;
    const sampling = request.sampling_params;
    const maxTokens = sampling != null && Object.hasOwn(sampling, 'max_tokens') ? sampling.max_tokens : undefined;
    context.started();
    if (behaviour.fault.kind === 'status') {
      trailersOnly(stream, grpcCodeOfHttpStatus(behaviour.fault.status), `Simulated failure (${SIM_HEADER.fault}: status:${behaviour.fault.status})`);
      context.finished(path, 'error-status', 0);
      return;
    }
    const plan = planGeneration({ ...behaviour, maxTokens, seed: behaviour.seed ?? context.nextSeed() });
    const truncates = plan.steps.some((step) => step.kind === 'truncate');
    let sent = 0;
    let ended = false;
    let trailers: Record<string, string> = { 'grpc-status': String(STATUS.OK) };
    // Replaced by play()'s canceller; a step due at once (ttft 0) runs before play() returns.
    let cancel: () => void = () => {};
    const end = (how: GenerationEnd): void => {
      if (ended) return;
      ended = true;
      cancel();
      context.finished(path, how, sent);
    };
    stream.once('close', () => end('client-closed'));
    stream.on('wantTrailers', () => stream.sendTrailers(trailers));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: !truncates });
    const write = (response: Record<string, unknown>): void => {
      stream.write(frame(VLLM_RESPONSE.encode(VLLM_RESPONSE.fromObject(response)).finish()));
    };
    cancel = play(plan, startMs, (step) => {
      if (stream.destroyed) return false;
      switch (step.kind) {
        case 'chunk':
          if (step.tokens > 0) {
            sent += step.tokens;
            write({ chunk: { token_ids: behaviour.stamp ? stampedTokenIds(step) : tokenIds(step), prompt_tokens: promptTokens, completion_tokens: sent, cached_tokens: 0 } });
          }
          if (step.finish === null) return true;
          write({
            complete: {
              output_ids: Array.from({ length: sent }, (_, i) => FIRST_TOKEN_ID + i),
              finish_reason: step.finish,
              prompt_tokens: promptTokens,
              completion_tokens: sent,
              cached_tokens: 0,
            },
          });
          stream.end();
          end('completed');
          return false;
        case 'error':
          trailers = { 'grpc-status': String(STATUS.INTERNAL), 'grpc-message': encodeURIComponent(`Simulated failure (${SIM_HEADER.fault}: error:${sent})`) };
          stream.end();
          end('errored');
          return false;
        case 'truncate':
          stream.end();
          end('truncated');
          return false;
        case 'reset':
          // After this turn's writes have left, as the HTTP reset fault does.
          setImmediate(() => stream.close(constants.NGHTTP2_INTERNAL_ERROR));
          end('reset');
          return false;
      }
    });
  });
}

interface TritonRequest {
  model_name?: string;
  model_version?: string;
  id?: string;
  parameters?: Record<string, { bool_param?: boolean }>;
  inputs?: Array<{ name?: string; contents?: { int_contents?: number[]; bytes_contents?: Uint8Array[] } | null }>;
  raw_input_contents?: Uint8Array[];
}

/** A BYTES tensor of one element, as Triton's raw contents: its 4-byte little-endian length, then the bytes. */
function bytesElement(text: string): Buffer {
  const body = Buffer.from(text);
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32LE(body.length, 0);
  body.copy(out, 4);
  return out;
}

function int32Tensor(values: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(4 * values.length);
  values.forEach((value, i) => out.writeInt32LE(value, 4 * i));
  return out;
}

/** The request's `max_tokens` input (INT32, raw or in contents), or undefined. */
function maxTokensOf(request: TritonRequest): number | undefined {
  const inputs = request.inputs ?? [];
  const index = inputs.findIndex((input) => input.name === 'max_tokens');
  if (index === -1) return undefined;
  const raw = request.raw_input_contents?.[index];
  if (raw !== undefined && raw.length >= 4) return Buffer.from(raw.buffer, raw.byteOffset, raw.length).readInt32LE(0);
  return inputs[index]!.contents?.int_contents?.[0];
}

/** Triton `GRPCInferenceService/ModelStreamInfer`. */
export function serveTritonModelStreamInfer(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, context: GrpcServiceContext): void {
  const path = GRPC_METHODS.tritonModelStreamInfer;
  const behaviour = behaviourOf(context, headers);
  if (typeof behaviour === 'string') {
    trailersOnly(stream, STATUS.INVALID_ARGUMENT, behaviour);
    stream.resume();
    return;
  }
  const queue: TritonRequest[] = [];
  let clientDone = false;
  let busy = false;
  let closed = false;
  let finishing = false;
  let cancel: () => void = () => {};
  let current: { sent: number } | undefined;
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': String(STATUS.OK) }));
  const write = (response: Record<string, unknown>): void => {
    stream.write(frame(TRITON_RESPONSE.encode(TRITON_RESPONSE.fromObject(response)).finish()));
  };
  const finishIfDone = (): void => {
    if (clientDone && !busy && queue.length === 0 && !finishing && !closed) {
      finishing = true;
      stream.end();
    }
  };
  const next = (): void => {
    if (busy || closed) return;
    const request = queue.shift();
    if (request === undefined) return finishIfDone();
    busy = true;
    const startMs = performance.now();
    context.started();
    const state = { sent: 0 };
    current = state;
    const base = { model_name: request.model_name ?? '', model_version: request.model_version || '1', id: request.id ?? '' };
    const done = (how: GenerationEnd | 'error-status', more: boolean): false => {
      busy = false;
      current = undefined;
      context.finished(path, how, state.sent);
      if (more) next();
      return false;
    };
    if (behaviour.fault.kind === 'status') {
      write({ error_message: `Simulated failure (${SIM_HEADER.fault}: status:${behaviour.fault.status})` });
      done('error-status', true);
      return;
    }
    const plan = planGeneration({ ...behaviour, maxTokens: maxTokensOf(request), seed: behaviour.seed ?? context.nextSeed() });
    cancel = play(plan, startMs, (step) => {
      if (stream.destroyed) return false;
      switch (step.kind) {
        case 'chunk': {
          if (step.tokens > 0) {
            state.sent += step.tokens;
            write({
              infer_response: {
                ...base,
                outputs: [
                  { name: 'text_output', datatype: 'BYTES', shape: [1] },
                  { name: 'output_ids', datatype: 'INT32', shape: [1, 1, step.tokens] },
                ],
                raw_output_contents: [bytesElement(step.text), int32Tensor(tokenIds(step))],
              },
            });
          }
          if (step.finish === null) return true;
          if (request.parameters?.triton_enable_empty_final_response?.bool_param === true) {
            write({ infer_response: { ...base, parameters: { triton_final_response: { bool_param: true } } } });
          }
          return done('completed', true);
        }
        case 'error':
          write({ error_message: `Simulated failure (${SIM_HEADER.fault}: error:${state.sent})` });
          return done('errored', true);
        case 'truncate':
          closed = true;
          stream.close(constants.NGHTTP2_NO_ERROR);
          return done('truncated', false);
        case 'reset':
          closed = true;
          setImmediate(() => stream.close(constants.NGHTTP2_INTERNAL_ERROR));
          return done('reset', false);
      }
    });
  };
  const decoder = new GrpcFrameDecoder(
    {
      onMessage: (message) => {
        try {
          queue.push(TRITON_REQUEST.decode(message) as TritonRequest);
        } catch {
          write({ error_message: 'ModelInferRequest does not parse' });
          return;
        }
        next();
      },
      onCompressed: () => write({ error_message: 'compressed requests are not supported' }),
      onOversized: () => write({ error_message: `request larger than ${MAX_REQUEST_MESSAGE_BYTES} bytes` }),
      onTruncated: () => {},
      onMalformed: () => write({ error_message: 'the request is not gRPC framing (a compressed flag other than 0 or 1)' }),
    },
    // Any flag 1 is answered as a compressed request, whether or not grpc-encoding declared it.
    { maxMessageBytes: MAX_REQUEST_MESSAGE_BYTES, compressionDeclared: true },
  );
  stream.on('data', (chunk: Buffer) => decoder.write(chunk));
  stream.on('end', () => {
    decoder.end();
    clientDone = true;
    finishIfDone();
  });
  stream.once('close', () => {
    closed = true;
    cancel();
    if (current !== undefined) {
      busy = false;
      context.finished(path, 'client-closed', current.sent);
      current = undefined;
    }
  });
}
