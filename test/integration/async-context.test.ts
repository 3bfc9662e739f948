import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServeProcess } from '../helpers/serve-process.js';

/**
 * The relay drives Node's HTTP parser itself, so it also supplies the parser's async resource. With
 * an AsyncLocalStorage active in the process (OpenTelemetry's context manager, APM agents), that
 * resource is written to by the storage's hook at every parser initialisation: a frozen one made the
 * hook throw, which Node treats as fatal, so the first client connection killed the sidecar.
 */
const PRELOAD = fileURLToPath(new URL('../helpers/enable-async-local-storage.mjs', import.meta.url));

let upstream: http.Server;
let upstreamUrl: string;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

describe('the relay under an active AsyncLocalStorage', () => {
  it('serves requests and stays up when an AsyncLocalStorage is in use in the process', async () => {
    const sidecar = await startServeProcess(upstreamUrl, [], { NODE_OPTIONS: `--import ${PRELOAD}` });
    try {
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${sidecar.proxy}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', stream: true, messages: [] }),
        });
        expect(response.status).toBe(200);
        expect(await response.text()).toBe('data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
      }
      expect(sidecar.child.exitCode).toBeNull();
      expect(sidecar.stderr()).not.toMatch(/not extensible/);
    } finally {
      sidecar.kill();
    }
  });
});
