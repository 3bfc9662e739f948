import { spawn, type ChildProcess } from 'node:child_process';
import { credentials, Metadata, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ENGINE_PROTOS } from '../../src/taps/grpc/engine-protos.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGTERM');
});

const GenerateRequest = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateRequest');
const GenerateResponse = ENGINE_PROTOS.smg.lookupType('vllm.grpc.engine.GenerateResponse');

/** The line the built CLI prints for its h2c listener, within 20 s. */
function h2cUrlOf(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`no h2c line in 20 s: ${output}`)), 20_000);
    child.once('exit', (code) => reject(new Error(`simulate exited with ${code} before listening: ${output}`)));
    child.stdout!.on('data', (part: Buffer) => {
      output += part.toString();
      const url = /h2c .* listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (url !== undefined) {
        clearTimeout(timer);
        resolve(url);
      }
    });
  });
}

describe('`tokentap simulate --h2c-port` from the build', () => {
  it('serves vLLM Generate to @grpc/grpc-js with the engine protos the build copied into dist/', async () => {
    const child = spawn(process.execPath, ['bin/tokentap.js', 'simulate', '--port', '0', '--h2c-port', '0', '--output-tokens', '3', '--ttft-ms', '1', '--itl-ms', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const url = await h2cUrlOf(child);
    const Client = makeGenericClientConstructor(
      {
        Generate: {
          path: '/vllm.grpc.engine.VllmEngine/Generate',
          requestStream: false,
          responseStream: true,
          requestSerialize: (value: object) => Buffer.from(GenerateRequest.encode(value).finish()),
          requestDeserialize: (bytes: Buffer) => GenerateRequest.decode(bytes),
          responseSerialize: (value: object) => Buffer.from(GenerateResponse.encode(value).finish()),
          responseDeserialize: (bytes: Buffer) => GenerateResponse.toObject(GenerateResponse.decode(bytes)),
        },
      },
      'VllmEngine',
    );
    const client = new Client(new URL(url).host, credentials.createInsecure()) as InstanceType<typeof Client> & { Generate(request: object, metadata: Metadata): NodeJS.EventEmitter };
    const call = client.Generate({ text: 'hello there' }, new Metadata());
    const messages: Array<Record<string, unknown>> = [];
    const error = await new Promise<ServiceError | undefined>((resolve) => {
      call.on('data', (message: Record<string, unknown>) => messages.push(message));
      call.on('error', resolve);
      call.on('end', () => resolve(undefined));
    });
    client.close();
    expect(error).toBeUndefined();
    expect(messages.map((message) => Object.keys(message)[0])).toEqual(['chunk', 'chunk', 'chunk', 'complete']);
  });
});
