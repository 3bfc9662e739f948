import { describe, it } from 'vitest';
import { scriptedRelay } from '../helpers/scripted-relay.js';

const relay = scriptedRelay('upstream_idle_timeout: 20s\n');

describe('probes', () => {
  it('P90 huge chunk extension and trailer section in a request', async () => {
    for (const [name, wire] of [
      ['ext', `POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;a=${'b'.repeat(1 << 20)}\r\nx\r\n0\r\n\r\n`],
      ['trailers', `POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n${'X-T: aaaaaaaaaaaaaaaa\r\n'.repeat(50000)}\r\n`],
    ] as const) {
      relay.upstream.mark();
      const c = await relay.client();
      c.write(wire);
      const text = await c.read((t) => t.includes('\r\n\r\n') && (t.includes('}') || t.includes('\n', t.indexOf('\r\n\r\n') + 4)), 5000).catch(String);
      console.log('P90', name, JSON.stringify(text.slice(0, 250)), 'upstream got', relay.upstream.since().length);
    }
  });
});
