import { Writable } from 'node:stream';
import { loadSettings } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { startSidecar } from '../../src/sidecar.js';

/** A sidecar on ephemeral loopback ports, with its log lines captured as parsed JSON. */
export async function startTestSidecar(upstream: string, configYaml = '') {
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line));
      callback();
    },
  });
  const settings = loadSettings({
    flags: { upstream, listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', config: configYaml ? 'test.yaml' : undefined },
    env: {},
    readFile: () => configYaml,
  });
  // Model discovery (on by default) sends its own GET /v1/models to the upstream, which test
  // upstreams that record "the last request" would see; only tests that configure it get it.
  const discovery = /^model_discovery:/m.test(configYaml) ? settings : { ...settings, modelDiscovery: undefined };
  const sidecar = await startSidecar(discovery, createLogger('info', sink));
  return { ...sidecar, logs };
}

/** Waits until `predicate` holds, polling; fails with `what` after `timeoutMs`. */
export async function eventually<T>(what: string, probe: () => T | Promise<T>, predicate: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (predicate(value)) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
