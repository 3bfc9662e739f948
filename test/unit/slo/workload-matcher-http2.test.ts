import { credentials, Metadata, makeGenericClientConstructor } from '@grpc/grpc-js';
import { createServer, type IncomingHttpHeaders, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';

const servers: Http2Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** The request headers of one real @grpc/grpc-js call, as node:http2 hands them to a server: pseudo-headers, metadata and all. */
async function grpcRequestHeaders(path: string, metadata: Record<string, string>): Promise<IncomingHttpHeaders> {
  const server = createServer();
  servers.push(server);
  const seen = new Promise<IncomingHttpHeaders>((resolve) =>
    server.on('stream', (stream, headers) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
      resolve(headers);
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const Client = makeGenericClientConstructor(
    { Call: { path, requestStream: false, responseStream: true, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b } },
    'Any',
  );
  const client = new Client(`127.0.0.1:${(server.address() as AddressInfo).port}`, credentials.createInsecure()) as InstanceType<typeof Client> & { Call(body: Buffer, metadata: Metadata): NodeJS.EventEmitter };
  const m = new Metadata();
  for (const [name, value] of Object.entries(metadata)) m.set(name, value);
  const call = client.Call(Buffer.alloc(0), m);
  call.on('data', () => {});
  call.on('error', () => {});
  await new Promise((resolve) => call.on('status', resolve));
  client.close();
  return seen;
}

describe('workloads match gRPC calls', () => {
  const matcher = new WorkloadMatcher(
    loadSettings({
      flags: { config: 'w.yaml' },
      env: {},
      readFile: () => `
workloads:
  - name: batch-vllm
    match: { header: { x-tenant: batch }, path: /vllm.grpc.engine.VllmEngine/Generate }
  - name: triton
    match: { path: /inference.GRPCInferenceService/* }
  - name: default
`,
    }).workloads,
  );

  it('on the gRPC method (:path) and the call\'s metadata, from the headers node:http2 parses', async () => {
    const generate = '/vllm.grpc.engine.VllmEngine/Generate';
    const batch = await grpcRequestHeaders(generate, { 'x-tenant': 'batch' });
    expect(batch[':path']).toBe(generate);
    expect(batch['x-tenant']).toBe('batch');
    expect(matcher.match(batch, batch[':path'] as string, undefined).name).toBe('batch-vllm');
    const other = await grpcRequestHeaders(generate, { 'x-tenant': 'interactive' });
    expect(matcher.match(other, other[':path'] as string, undefined).name).toBe('default');
    const triton = await grpcRequestHeaders('/inference.GRPCInferenceService/ModelStreamInfer', {});
    expect(matcher.match(triton, triton[':path'] as string, undefined).name).toBe('triton');
  });
});
