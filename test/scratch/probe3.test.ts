import { describe, it } from 'vitest';
import net from 'node:net';
import type { RawClient } from '../helpers/raw-http.js';
import { scriptedRelay } from '../helpers/scripted-relay.js';

const relay = scriptedRelay('upstream_idle_timeout: 20s\n');
const { scripts } = relay;

describe('probes', () => {
  it('P11 client leaves after a malformed pipelined request, while the first waits for its answer', async () => {
    let upstreamClosedAt = 0;
    const t0 = performance.now();
    scripts['/slow'] = (s) => { s.once('close', () => (upstreamClosedAt = performance.now() - t0)); setTimeout(() => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'), 2000); };
    const c = await relay.client();
    c.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n');
    await new Promise((r) => setTimeout(r, 100));
    c.close();
    await new Promise((r) => setTimeout(r, 2600));
    console.log('P11 upstream closed at', upstreamClosedAt, 'logs', JSON.stringify(relay.sidecar.logs.filter((l) => l.msg === 'request').map((l) => [l.path, l.outcome, l.e2e_ms])));
  });

  it('P3 refusal followed by more client data: is the 400 received?', async () => {
    const results: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { hostname, port } = new URL(relay.sidecar.proxyUrl);
      const sock = net.connect({ host: hostname, port: Number(port) });
      let got = '';
      let err = '';
      sock.on('data', (d) => (got += d.toString('latin1')));
      sock.on('error', (e) => (err = (e as NodeJS.ErrnoException).code ?? e.message));
      await new Promise((r) => sock.once('connect', r));
      // a malformed chunked body after the head, then a lot more data
      sock.write('POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
      const big = Buffer.alloc(4 << 20, 'y');
      sock.write(big);
      await new Promise((r) => { sock.on('close', r); setTimeout(r, 3000); });
      results.push(`${got.slice(0, 30).replace(/\r\n/g, ' ')}|err=${err}`);
    }
    console.log('P3', JSON.stringify(results));
  });
});
