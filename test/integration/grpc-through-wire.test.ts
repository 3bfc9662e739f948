import { credentials, Metadata, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ENGINE_PROTOS } from '../../src/taps/grpc/engine-protos.js';
import { eventually, startTestSidecar } from '../helpers/sidecar.js';
import { simulator } from '../unit/simulator/helpers.js';

/**
 * @grpc/grpc-js (the gRPC project's own Node client) through tokentap's HTTP/2 wire to the
 * simulator's vLLM Generate over h2c (issue 24): the messages arrive as the engine sent them, and the
 * gRPC tap measures the call through the wire's door.
 */

const GenerateRequest = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateRequest');
const GenerateResponse = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateResponse');
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
  },
  'VllmEngine',
);
type GenerateClient = InstanceType<typeof Client> & { Generate(request: object, metadata: Metadata): NodeJS.EventEmitter };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function generate(url: string): Promise<{ messages: Array<Record<string, unknown>>; error: ServiceError | undefined }> {
  const client = new Client(new URL(url).host, credentials.createInsecure()) as GenerateClient;
  cleanups.push(() => client.close());
  const call = client.Generate(GenerateRequest.fromObject({ request_id: 'r1', tokenized: { input_ids: [1, 2, 3, 4, 5, 6, 7] }, stream: true }), new Metadata());
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
});
