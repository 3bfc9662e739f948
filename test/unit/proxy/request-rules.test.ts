import { describe, expect, it } from 'vitest';
import { endToEndHeaders, withHost } from '../../../src/proxy/hop-by-hop.js';
import { checkRequestHead, targetPath } from '../../../src/proxy/http1/request-rules.js';

describe('request rules', () => {
  it('reduces every target form to the path that is logged, routed and matched', () => {
    expect(targetPath('/v1/chat/completions?key=x')).toBe('/v1/chat/completions');
    expect(targetPath('http://user:SECRET@host:8000/v1/chat/completions?key=x')).toBe('/v1/chat/completions');
    expect(targetPath('HTTPS://host')).toBe('/');
    expect(targetPath('*')).toBe('*');
  });

  it('decides the framing from the validated fields, never both', () => {
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Content-Length', '12'])).toMatchObject({ ok: true, framing: 'length', contentLength: 12 });
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Transfer-Encoding', 'Chunked '])).toMatchObject({ ok: true, framing: 'chunked', contentLength: -1 });
    expect(checkRequestHead(1, 1, 'GET', '/x', ['Host', 'h'])).toMatchObject({ ok: true, framing: 'none', host: undefined, hostMissing: false });
    // Empty list elements are ignored (RFC 9110 5.6.1); no element at all is refused.
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Transfer-Encoding', ', chunked'])).toMatchObject({ ok: true, framing: 'chunked' });
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Transfer-Encoding', ' , ', 'Content-Length', '2'])).toMatchObject({ ok: false, status: 400 });
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Transfer-Encoding', 'gzip', 'Transfer-Encoding', 'chunked'])).toMatchObject({ ok: false, status: 501 });
    // The length written upstream is the one llhttp counts: a Number holds it exactly up to 2^53 - 1.
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Content-Length', '9007199254740991'])).toMatchObject({ ok: true, contentLength: 9007199254740991 });
    expect(checkRequestHead(1, 1, 'POST', '/x', ['Host', 'h', 'Content-Length', '9007199254740992'])).toEqual({ ok: false, status: 400, reason: 'Content-Length is larger than 2^53 - 1' });
  });

  it('takes the Host from an absolute-form target, and never quotes a target in a reason', () => {
    expect(checkRequestHead(1, 1, 'GET', 'http://Model:8000?x=1', ['Host', 'other'])).toMatchObject({ ok: true, target: '/?x=1', host: 'Model:8000' });
    expect(checkRequestHead(1, 0, 'GET', 'http://m/v1', [])).toMatchObject({ ok: true, target: '/v1', host: 'm', hostMissing: true });
    const refused = checkRequestHead(1, 1, 'GET', 'http://u:SECRET@m/v1?key=QUERY', ['Host', 'm']);
    expect(refused).toMatchObject({ ok: false, status: 400 });
    expect(JSON.stringify(refused)).not.toMatch(/SECRET|QUERY/);
  });
});

describe('hop-by-hop fields', () => {
  it('lets Connection nominate neither framing nor routing fields, and drops Content-Length for tokentap to write', () => {
    const headers = ['Host', 'h', 'Connection', 'Content-Length, HOST, transfer-encoding, X-Hop', 'X-Hop', '1', 'Content-Length', '3', 'X-End', '2'];
    expect(endToEndHeaders(headers)).toEqual(['Host', 'h', 'X-End', '2']);
  });

  it('sets Host in the place of the first Host field, or first', () => {
    expect(withHost(['A', '1', 'host', 'x', 'B', '2', 'Host', 'y'], 'm:1')).toEqual(['A', '1', 'host', 'm:1', 'B', '2']);
    expect(withHost(['A', '1'], 'm:1')).toEqual(['Host', 'm:1', 'A', '1']);
  });
});
