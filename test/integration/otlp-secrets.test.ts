import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { RawClient } from '../helpers/raw-http.js';
import { startReplayUpstream } from '../helpers/replay-upstream.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { eventually } from '../helpers/sidecar.js';
import { chatChunk, sse } from '../helpers/tap-harness.js';

/**
 * No client credential, prompt or upstream error text reaches what the built CLI exports over OTLP
 * (span names, attributes, events, status, resource, in the bytes the collector receives) or what
 * it writes to stdout and stderr.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const SECRETS = ['AUTHSECRET', 'COOKIESECRET', 'APIKEYSECRET', 'PROXYAUTHSECRET', 'QUERYSECRET', 'PROMPTSECRET', 'UPSTREAMERRORSECRET', 'STREAMSECRET'];

describe('secrets and OTLP export', () => {
  it('exports no credential header, query token, prompt, completion or upstream error body, in either encoding', async () => {
    for (const protocol of ['http/json', 'http/protobuf']) {
      const upstream = await startReplayUpstream((request) =>
        request.url.startsWith('/v1/completions')
          ? { status: 500, headers: { 'content-type': 'application/json' }, chunks: [Buffer.from('{"error":{"message":"UPSTREAMERRORSECRET"}}')] }
          : { chunks: sse(chatChunk({ content: 'STREAMSECRET' }), '[DONE]') },
      );
      cleanups.push(() => upstream.close());
      const receiver = await startOtlpReceiver();
      cleanups.push(() => receiver.close());
      const serve = await startServeProcess(upstream.url, [], { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: protocol, OTEL_METRIC_EXPORT_INTERVAL: '200', OTEL_BSP_SCHEDULE_DELAY: '50' });
      cleanups.push(serve.kill);

      for (const path of ['/v1/chat/completions?api_key=QUERYSECRET', '/v1/completions?api_key=QUERYSECRET']) {
        const body = JSON.stringify({ model: 'm', stream: true, prompt: 'PROMPTSECRET', messages: [{ role: 'user', content: 'PROMPTSECRET' }] });
        const client = await RawClient.connect(serve.proxy);
        client.write(
          `POST ${path} HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer AUTHSECRET\r\nCookie: session=COOKIESECRET\r\nX-Api-Key: APIKEYSECRET\r\n` +
            `Proxy-Authorization: Basic PROXYAUTHSECRET\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        );
        const answer = await client.readToClose();
        client.close();
        // The client gets its answer, secrets and all: only observation must not keep them.
        expect(answer).toContain(path.startsWith('/v1/completions') ? 'UPSTREAMERRORSECRET' : 'STREAMSECRET');
      }
      await eventually(`two spans (${protocol})`, () => receiver.exports.filter((e) => e.path === '/v1/traces').length, (n) => n >= 1, 15_000);
      serve.child.kill('SIGTERM');
      expect((await serve.exit).code).toBe(0);
      expect(receiver.exports.some((e) => e.path === '/v1/metrics')).toBe(true);
      const exported = Buffer.concat(receiver.exports.map((e) => e.body)).toString('latin1');
      // The spans are there, with the upstream's 500 recorded as a status code and nothing of its body.
      expect(exported).toContain('/v1/completions');
      for (const secret of SECRETS) {
        expect(exported, `${protocol} export`).not.toContain(secret);
        expect(serve.logs().map((l) => JSON.stringify(l)).join('\n') + serve.stderr(), 'stdout and stderr').not.toContain(secret);
      }
    }
  }, 90_000);
});
