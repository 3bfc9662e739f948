import type net from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { startCaptureUpstream } from './capture-upstream.js';
import { RawClient } from './raw-http.js';
import { startTestSidecar } from './sidecar.js';

/**
 * The response-direction security tests' setup, in one place: a capturing raw upstream that answers
 * each request with the script registered for its target (a request with no script gets the
 * capture's default answer), a sidecar in front of it, and raw clients closed after the file.
 * Call at the top of a test file; the fields are set once beforeAll has run.
 */
export function scriptedRelay(sidecarConfig = 'upstream_idle_timeout: 20s\n') {
  const scripts: Record<string, (socket: net.Socket) => void> = {};
  const clients: RawClient[] = [];
  const relay = {
    scripts,
    upstream: undefined as unknown as Awaited<ReturnType<typeof startCaptureUpstream>>,
    sidecar: undefined as unknown as Awaited<ReturnType<typeof startTestSidecar>>,
    /** A raw client connection to the proxy listener, closed after the file's tests. */
    async client(): Promise<RawClient> {
      const c = await RawClient.connect(relay.sidecar.proxyUrl);
      clients.push(c);
      return c;
    },
  };
  beforeAll(async () => {
    relay.upstream = await startCaptureUpstream((message, socket) => {
      const script = scripts[message.target];
      if (script === undefined) return false;
      script(socket);
      return true;
    });
    relay.sidecar = await startTestSidecar(relay.upstream.url, sidecarConfig);
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await relay.sidecar?.close();
    await relay.upstream?.close();
  });
  return relay;
}
