import { credentials, Metadata, makeGenericClientConstructor, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ENGINE_PROTOS } from '../../src/taps/grpc/engine-protos.js';
import { histogram, scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { simulator } from '../unit/simulator/helpers.js';

/**
 * @grpc/grpc-js (the gRPC project's own Node client) through tokentap's HTTP/2 wire to the
 * simulator's vLLM Generate over h2c (issue 24): the messages arrive as the engine sent them, and the
 * gRPC tap measures the call through the wire's door.
 */

const GenerateRequest = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateRequest');
const GenerateResponse = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateResponse');
const ModelInferRequest = ENGINE_PROTOS.triton.lookupType('inference.ModelInferRequest');
const ModelStreamInferResponse = ENGINE_PROTOS.triton.lookupType('inference.ModelStreamInferResponse');
const Client = makeGenericClientConstructor(
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
  'VllmEngine',
);
type Call = NodeJS.EventEmitter & { cancel(): void; write(value: object): void; end(): void };
type GenerateClient = InstanceType<typeof Client> & {
  Generate(request: object, metadata: Metadata, options?: { deadline?: number }): Call;
  ModelStreamInfer(metadata: Metadata): Call;
};

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function clientOf(url: string): GenerateClient {
  const client = new Client(new URL(url).host, credentials.createInsecure()) as GenerateClient;
  cleanups.push(() => client.close());
  return client;
}

function metadata(headers: Record<string, string>): Metadata {
  const m = new Metadata();
  for (const [name, value] of Object.entries(headers)) m.set(name, value);
  return m;
}

function generate(url: string, headers: Record<string, string> = {}): Promise<{ messages: Array<Record<string, unknown>>; error: ServiceError | undefined }> {
  return collect(clientOf(url).Generate(GenerateRequest.fromObject({ request_id: 'r1', tokenized: { input_ids: [1, 2, 3, 4, 5, 6, 7] }, stream: true }), metadata(headers)));
}

function collect(call: NodeJS.EventEmitter): Promise<{ messages: Array<Record<string, unknown>>; error: ServiceError | undefined }> {
  const messages: Array<Record<string, unknown>> = [];
  return new Promise((resolve) => {
    call.on('data', (message: Record<string, unknown>) => messages.push(message));
    call.on('error', (error: ServiceError) => resolve({ messages, error }));
    call.on('end', () => resolve({ messages, error: undefined }));
  });
}

describe('gRPC through the HTTP/2 wire', () => {
  it('gives @grpc/grpc-js the simulator`s vLLM Generate messages as it gives them directly, and the request is measured completed with its tokens', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 5, tokensPerChunk: 2 });
    const sidecar = await startTestSidecar(sim.h2cUrl as string, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const direct = await generate(sim.h2cUrl as string);
    const through = await generate(sidecar.proxyUrl);
    expect(through.error).toBeUndefined();
    expect(through.messages).toEqual(direct.messages);
    expect(through.messages.length).toBeGreaterThan(1);
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
    expect(line).toMatchObject({ path: '/vllm.grpc.engine.VllmEngine/Generate', status: 200, outcome: 'completed', output_tokens: 5 });
    expect(line?.ttft_ms).toEqual(expect.any(Number));
  });

  it('gives @grpc/grpc-js UNAVAILABLE naming upstream_protocol when the upstream is HTTP/1.1', async () => {
    const sim = await simulator({ h2cPort: 0 });
    const sidecar = await startTestSidecar(sim.url);
    cleanups.push(() => sidecar.close());
    const { error } = await generate(sidecar.proxyUrl);
    expect(error?.code).toBe(14);
    expect(error?.details).toContain('upstream_protocol: h2c');
  });

  it('gives @grpc/grpc-js the simulator`s Triton ModelStreamInfer messages as it gives them directly, measured completed with every token, TTFT once and N - 1 per-token ITL samples in /metrics', async () => {
    const tokens = 6;
    // Two simulators alike: each one's text is seeded from its start, so a second call to one differs.
    const options = { h2cPort: 0, outputTokens: 50, tokensPerChunk: 1, ttftMs: 150 };
    const sim = await simulator(options);
    const twin = await simulator(options);
    const sidecar = await startTestSidecar(twin.h2cUrl as string, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const streamInfer = (url: string) => {
      const call = clientOf(url).ModelStreamInfer(new Metadata());
      const result = collect(call);
      call.write(tritonRequest('a', tokens));
      call.end();
      return result;
    };
    const direct = await streamInfer(sim.h2cUrl as string);
    const through = await streamInfer(sidecar.proxyUrl);
    expect(through.error).toBeUndefined();
    expect(through.messages).toEqual(direct.messages);
    expect(through.messages).toHaveLength(tokens);
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
    expect(line).toMatchObject({ path: '/inference.GRPCInferenceService/ModelStreamInfer', status: 200, outcome: 'completed', output_tokens: tokens });
    // The engine's TTFT is a floor: a loaded machine only adds to it.
    expect(line?.ttft_ms as number).toBeGreaterThanOrEqual(150);
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'completed' })).toBe(1);
    expect(sumValues(metrics, 'tokentap_requests_total')).toBe(1);
    expect(sumValues(metrics, 'tokentap_tokens_total', { gen_ai_token_type: 'output' })).toBe(tokens);
    expect(histogram(metrics, 'gen_ai_server_time_to_first_token_seconds').count).toBe(1);
    expect(histogram(metrics, 'tokentap_inter_token_latency_seconds').count).toBe(tokens - 1);
  });

  it('records a simulator RESOURCE_EXHAUSTED (x-sim-fault status:429) as upstream_error and hands grpc-js the status unchanged', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 8 });
    const sidecar = await startTestSidecar(sim.h2cUrl as string, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const { messages, error } = await generate(sidecar.proxyUrl, { 'x-sim-fault': 'status:429' });
    expect(messages).toHaveLength(0);
    expect(error?.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'upstream_error' });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'upstream_error' })).toBe(1);
  });

  it('records a grpc-js cancel() mid-stream as client_cancelled, and the simulator sees its stream cancelled (generation stops)', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 1000, itlMs: 5 });
    const sidecar = await startTestSidecar(sim.h2cUrl as string, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const closed = new Promise((resolve) => sim.events.once('request-closed', resolve));
    const call = clientOf(sidecar.proxyUrl).Generate(GenerateRequest.fromObject({ text: 'hi' }), new Metadata());
    call.on('error', () => {});
    call.once('data', () => call.cancel());
    expect(await closed).toMatchObject({ end: 'client-closed', completed: false });
    expect(sim.stats()).toMatchObject({ inFlight: 0, clientAborts: 1 });
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'client_cancelled' });
    const metrics = await scrape(sidecar.adminUrl);
    expect(sumValues(metrics, 'tokentap_requests_total', { outcome: 'client_cancelled' })).toBe(1);
  });

  it('records a grpc-js deadline that passes mid-stream as client_cancelled (the client reset its stream), and the simulator stops generating', async () => {
    const sim = await simulator({ h2cPort: 0, outputTokens: 1000, itlMs: 5 });
    const sidecar = await startTestSidecar(sim.h2cUrl as string, 'upstream_protocol: h2c\n');
    cleanups.push(() => sidecar.close());
    const closed = new Promise((resolve) => sim.events.once('request-closed', resolve));
    const { messages, error } = await collect(clientOf(sidecar.proxyUrl).Generate(GenerateRequest.fromObject({ text: 'hi' }), new Metadata(), { deadline: Date.now() + 400 }));
    expect(error?.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    expect(messages.length).toBeLessThan(1000);
    expect(await closed).toMatchObject({ end: 'client-closed', completed: false });
    const [line] = await eventually('the request line', () => sidecar.logs.filter((l) => l.msg === 'request'), (lines) => lines.length === 1);
    expect(line).toMatchObject({ outcome: 'client_cancelled' });
  });
});

/** A BYTES tensor element: 4-byte little-endian length, then the bytes. */
function bytesElement(text: string): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32LE(Buffer.byteLength(text));
  return Buffer.concat([length, Buffer.from(text)]);
}

/** A Triton (TensorRT-LLM ensemble) streaming request for `maxTokens` tokens. */
function tritonRequest(id: string, maxTokens: number): object {
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
  });
}
