import { credentials, Metadata, makeGenericClientConstructor, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { ENGINE_PROTOS } from '../../../src/taps/grpc/engine-protos.js';
import { createVllmGrpcTap } from '../../../src/taps/vllm-grpc.js';
import { createTritonGrpcTap } from '../../../src/taps/triton-grpc.js';
import { runGrpcTap } from '../../helpers/grpc-frames.js';
import { simulator } from './helpers.js';

const smg = ENGINE_PROTOS.smg;
const triton = ENGINE_PROTOS.triton;
const GenerateRequest = smg.lookupType('vllm.grpc.engine.GenerateRequest');
const GenerateResponse = smg.lookupType('vllm.grpc.engine.GenerateResponse');
const ModelInferRequest = triton.lookupType('inference.ModelInferRequest');
const ModelStreamInferResponse = triton.lookupType('inference.ModelStreamInferResponse');

/** grpc-js clients of the two services, serialising with the engines' own protos: the gRPC project's own Node client, no generated code. */
const Clients = makeGenericClientConstructor(
  {
    Generate: {
      path: '/vllm.grpc.engine.VllmEngine/Generate',
      requestStream: false,
      responseStream: true,
      requestSerialize: (value: object) => Buffer.from(GenerateRequest.encode(GenerateRequest.fromObject(value)).finish()),
      requestDeserialize: (bytes: Buffer) => GenerateRequest.decode(bytes),
      responseSerialize: (value: object) => Buffer.from(GenerateResponse.encode(GenerateResponse.fromObject(value)).finish()),
      responseDeserialize: (bytes: Buffer) => GenerateResponse.toObject(GenerateResponse.decode(bytes), { defaults: false }),
    },
    ModelStreamInfer: {
      path: '/inference.GRPCInferenceService/ModelStreamInfer',
      requestStream: true,
      responseStream: true,
      requestSerialize: (value: object) => Buffer.from(ModelInferRequest.encode(ModelInferRequest.fromObject(value)).finish()),
      requestDeserialize: (bytes: Buffer) => ModelInferRequest.decode(bytes),
      responseSerialize: (value: object) => Buffer.from(ModelStreamInferResponse.encode(ModelStreamInferResponse.fromObject(value)).finish()),
      responseDeserialize: (bytes: Buffer) => ModelStreamInferResponse.toObject(ModelStreamInferResponse.decode(bytes), { defaults: false }),
    },
  },
  'SimulatedEngines',
);

type AnyClient = InstanceType<typeof Clients> & Record<string, (...args: unknown[]) => NodeJS.EventEmitter & { write?(v: object): void; end?(): void }>;

const clients: AnyClient[] = [];
const sessions: ClientHttp2Session[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.close();
  for (const session of sessions.splice(0)) session.destroy();
});

function clientOf(h2cUrl: string): AnyClient {
  const client = new Clients(new URL(h2cUrl).host, credentials.createInsecure()) as AnyClient;
  clients.push(client);
  return client;
}

function metadata(headers: Record<string, string>): Metadata {
  const m = new Metadata();
  for (const [name, value] of Object.entries(headers)) m.set(name, value);
  return m;
}

interface CallResult {
  messages: Array<Record<string, unknown>>;
  error: ServiceError | undefined;
}

function collect(call: NodeJS.EventEmitter): Promise<CallResult> {
  const messages: Array<Record<string, unknown>> = [];
  return new Promise((resolve) => {
    call.on('data', (message: Record<string, unknown>) => messages.push(message));
    call.on('error', (error: ServiceError) => resolve({ messages, error }));
    call.on('end', () => resolve({ messages, error: undefined }));
  });
}

const generate = (client: AnyClient, request: object, headers: Record<string, string> = {}) =>
  collect(client.Generate!(GenerateRequest.fromObject(request), metadata(headers)));

describe('the simulator\'s vLLM Generate over h2c, read by @grpc/grpc-js', () => {
  it('streams one chunk per step with its token_ids and cumulative counts, then the final message, then OK', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 5, tokensPerChunk: 2 });
    const { messages, error } = await generate(clientOf(sim.h2cUrl!), { request_id: 'r1', tokenized: { input_ids: [1, 2, 3, 4, 5, 6, 7] }, stream: true });
    expect(error).toBeUndefined();
    const chunk = (ids: number[], completion: number) => ({ chunk: { token_ids: ids, prompt_tokens: 7, completion_tokens: completion, cached_tokens: 0 } });
    expect(messages).toEqual([
      chunk([1000, 1001], 2),
      chunk([1002, 1003], 4),
      chunk([1004], 5),
      { complete: { output_ids: [1000, 1001, 1002, 1003, 1004], finish_reason: 'stop', prompt_tokens: 7, completion_tokens: 5, cached_tokens: 0 } },
    ]);
  });

  it('with x-sim-stamp, makes each chunk\'s token_ids its send time in microseconds modulo 2^32, the counts unchanged', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 4, ttftMs: 0, itlMs: 30 });
    const receivedUs: bigint[] = [];
    const call = clientOf(sim.h2cUrl!).Generate!(GenerateRequest.fromObject({ text: 'hi' }), metadata({ 'x-sim-stamp': '1' }));
    call.on('data', () => receivedUs.push(process.hrtime.bigint() / 1000n));
    const { messages, error } = await collect(call);
    expect(error).toBeUndefined();
    const chunks = messages.slice(0, -1).map((m) => (m as { chunk: { token_ids: number[]; completion_tokens: number } }).chunk);
    expect(chunks.map((c) => [c.token_ids.length, c.completion_tokens])).toEqual([[1, 1], [1, 2], [1, 3], [1, 4]]);
    const wrap = 2n ** 32n;
    chunks.forEach((chunk, i) => {
      // Received after it was sent, well within a (loaded) second.
      const delayUs = (((receivedUs[i] as bigint) - BigInt(chunk.token_ids[0] as number)) % wrap + wrap) % wrap;
      expect(delayUs).toBeLessThan(1_000_000n);
      // Consecutive chunks were sent about 30 ms apart: their stamps are, too (positions would differ by 1).
      if (i > 0) expect((BigInt(chunk.token_ids[0] as number) - BigInt(chunks[i - 1]!.token_ids[0] as number) + wrap) % wrap).toBeGreaterThan(20_000n);
    });
    expect(messages.at(-1)).toMatchObject({ complete: { output_ids: [1000, 1001, 1002, 1003], completion_tokens: 4 } });
  });

  it('stops at the request\'s max_tokens with finish_reason length', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 50 });
    const { messages } = await generate(clientOf(sim.h2cUrl!), { text: 'three word prompt', sampling_params: { max_tokens: 2 } });
    expect(messages.at(-1)).toEqual({ complete: { output_ids: [1000, 1001], finish_reason: 'length', prompt_tokens: 3, completion_tokens: 2, cached_tokens: 0 } });
    expect(messages).toHaveLength(3);
  });

  it.each([
    ['status:429', 0, GrpcStatus.RESOURCE_EXHAUSTED],
    ['status:503', 0, GrpcStatus.UNAVAILABLE],
    ['status:400', 0, GrpcStatus.INVALID_ARGUMENT],
    ['error:2', 2, GrpcStatus.INTERNAL],
    ['reset:2', 2, GrpcStatus.INTERNAL],
  ])('answers the fault %s with %i chunks and then gRPC status %i', async (fault, chunks, code) => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 8 });
    const { messages, error } = await generate(clientOf(sim.h2cUrl!), { text: 'hi' }, { 'x-sim-fault': fault });
    expect(messages).toHaveLength(chunks);
    expect(error?.code).toBe(code);
  });

  it('ends a truncated call without a status, which the client sees as an error', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 8 });
    const { messages, error } = await generate(clientOf(sim.h2cUrl!), { text: 'hi' }, { 'x-sim-fault': 'truncate:3' });
    expect(messages).toHaveLength(3);
    expect(error?.code).not.toBe(GrpcStatus.OK);
    expect(error).toBeDefined();
  });

  it('refuses bad x-sim metadata with INVALID_ARGUMENT naming it', async () => {
    const sim = await simulator({ h2cPort: 0 });
    const { error } = await generate(clientOf(sim.h2cUrl!), { text: 'hi' }, { 'x-sim-ttft-ms': 'soon' });
    expect(error?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(error?.details).toContain('x-sim-ttft-ms');
  });

  it('stops generating when the client cancels, and counts the abort', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 1000, itlMs: 5 });
    const call = clientOf(sim.h2cUrl!).Generate!(GenerateRequest.fromObject({ text: 'hi' }), new Metadata()) as NodeJS.EventEmitter & { cancel(): void };
    const closed = new Promise((resolve) => sim.events.once('request-closed', resolve));
    call.on('error', () => {});
    call.once('data', () => call.cancel());
    expect(await closed).toMatchObject({ end: 'client-closed', completed: false });
    expect(sim.stats()).toMatchObject({ inFlight: 0, clientAborts: 1 });
  });
});

/** A BYTES tensor element: 4-byte little-endian length, then the bytes. */
function bytesElement(text: string): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32LE(Buffer.byteLength(text));
  return Buffer.concat([length, Buffer.from(text)]);
}

describe('the simulator\'s Triton ModelStreamInfer over h2c, read by @grpc/grpc-js', () => {
  const request = (id: string, maxTokens: number, finalResponse: boolean) => {
    const maxTokensBytes = Buffer.alloc(4);
    maxTokensBytes.writeInt32LE(maxTokens);
    return ModelInferRequest.fromObject({
      model_name: 'ensemble',
      id,
      inputs: [
        { name: 'text_input', datatype: 'BYTES', shape: [1] },
        { name: 'max_tokens', datatype: 'INT32', shape: [1] },
      ],
      raw_input_contents: [bytesElement('a prompt'), maxTokensBytes],
      parameters: finalResponse ? { triton_enable_empty_final_response: { bool_param: true } } : {},
    });
  };

  it('answers each request in turn with one response per step carrying text_output and output_ids, then ends OK', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 50, tokensPerChunk: 2 });
    const call = clientOf(sim.h2cUrl!).ModelStreamInfer!(new Metadata()) as NodeJS.EventEmitter & { write(v: object): void; end(): void };
    const result = collect(call);
    call.write(request('a', 3, true));
    call.write(request('b', 1, false));
    call.end();
    const { messages, error } = await result;
    expect(error).toBeUndefined();
    const ids = (message: Record<string, unknown>) => {
      const infer = message.infer_response as { id: string; outputs?: Array<{ name: string; shape: number[] }>; raw_output_contents?: Buffer[]; parameters?: object };
      if (infer.outputs === undefined) return `${infer.id} final ${JSON.stringify(infer.parameters)}`;
      const raw = infer.raw_output_contents![1]!;
      const tokens = Array.from({ length: raw.length / 4 }, (_, i) => raw.readInt32LE(4 * i));
      return `${infer.id} ${infer.outputs.map((o) => `${o.name}[${o.shape.join(',')}]`).join(' ')} ${tokens.join(',')}`;
    };
    expect(messages.map(ids)).toEqual([
      'a text_output[1] output_ids[1,1,2] 1000,1001',
      'a text_output[1] output_ids[1,1,1] 1002',
      'a final {"triton_final_response":{"bool_param":true}}',
      'b text_output[1] output_ids[1,1,1] 1000',
    ]);
  });

  it('reports a status fault in the stream as error_message and goes on with the call', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 3 });
    const call = clientOf(sim.h2cUrl!).ModelStreamInfer!(metadata({ 'x-sim-fault': 'status:500' })) as NodeJS.EventEmitter & { write(v: object): void; end(): void };
    const result = collect(call);
    call.write(request('a', 3, false));
    call.end();
    const { messages, error } = await result;
    expect(error).toBeUndefined();
    expect(messages).toEqual([{ error_message: 'Simulated failure (x-sim-fault: status:500)' }]);
  });
});

/** The raw gRPC response of one call over node:http2: its DATA bytes and trailers. */
function rawCall(h2cUrl: string, path: string, message: Uint8Array, headers: Record<string, string> = {}): Promise<{ data: Buffer; trailers: IncomingHttpHeaders | undefined }> {
  const session = connect(h2cUrl);
  sessions.push(session);
  const body = Buffer.alloc(5 + message.length);
  body.writeUInt32BE(message.length, 1);
  Buffer.from(message).copy(body, 5);
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  stream.end(body);
  const parts: Buffer[] = [];
  let trailers: IncomingHttpHeaders | undefined;
  stream.on('data', (part: Buffer) => parts.push(part));
  stream.on('trailers', (t) => (trailers = t));
  return new Promise((resolve) => stream.on('close', () => resolve({ data: Buffer.concat(parts), trailers })));
}

describe('the gRPC taps read the simulator\'s streams', () => {
  it('counts every token of a vLLM Generate stream, with its usage and OK', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 9, tokensPerChunk: 2 });
    const { data, trailers } = await rawCall(sim.h2cUrl!, '/vllm.grpc.engine.VllmEngine/Generate', GenerateRequest.encode({ text: 'one two' }).finish());
    const run = runGrpcTap(createVllmGrpcTap, [data], trailers);
    expect(run.timeline).toMatchObject({ contentEvents: 5, countedTokens: 9, reportedOutputTokens: 9, reportedInputTokens: 2, terminal: true, statusOutcome: undefined });
    expect(run.problems).toEqual([]);
  });

  it('counts every token of a Triton ModelStreamInfer stream from output_ids', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 7, tokensPerChunk: 3 });
    const { data, trailers } = await rawCall(sim.h2cUrl!, '/inference.GRPCInferenceService/ModelStreamInfer', ModelInferRequest.encode({ model_name: 'm', inputs: [] }).finish());
    const run = runGrpcTap(createTritonGrpcTap, [data], trailers);
    expect(run.timeline).toMatchObject({ contentEvents: 3, countedTokens: 7, terminal: true, errorEvent: false });
    expect(run.problems).toEqual([]);
  });
});

describe('the simulator\'s HTTP APIs over h2c', () => {
  function post(session: ClientHttp2Session, path: string, body: object, headers: Record<string, string> = {}): Promise<{ status: number; body: string; error?: Error }> {
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json', ...headers });
    stream.end(JSON.stringify(body));
    let status = 0;
    let text = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (part: string) => (text += part));
    return new Promise((resolve) => {
      stream.on('error', (error) => resolve({ status, body: text, error }));
      stream.on('close', () => resolve({ status, body: text }));
    });
  }

  it('streams SSE chat completions over HTTP/2 as over HTTP/1.1', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 4 });
    const session = connect(sim.h2cUrl!);
    sessions.push(session);
    const { status, body } = await post(session, '/v1/chat/completions', { model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(status).toBe(200);
    const events = body.split('\n\n').filter((event) => event.startsWith('data: '));
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(events.filter((event) => event.includes('"content":"') && !event.includes('"content":""'))).toHaveLength(4);
  });

  it('resets only the faulted stream: a neighbour on the same connection completes', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 6, itlMs: 5 });
    const session = connect(sim.h2cUrl!);
    sessions.push(session);
    const chat = { model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] };
    const [reset, neighbour] = await Promise.all([post(session, '/v1/chat/completions', chat, { 'x-sim-fault': 'reset:1' }), post(session, '/v1/chat/completions', chat)]);
    expect(reset.error).toBeDefined();
    expect(neighbour.error).toBeUndefined();
    expect(neighbour.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('closes no HTTP/2 connection after a stream, even asked to behave as llama-server', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 2, closeAfterStream: true });
    const session = connect(sim.h2cUrl!);
    sessions.push(session);
    const first = await post(session, '/completion', { prompt: 'hi', stream: true });
    const second = await post(session, '/completion', { prompt: 'hi', stream: true });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.error).toBeUndefined();
  });
});
