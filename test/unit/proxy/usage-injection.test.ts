import { describe, expect, it } from 'vitest';
import { RouteTable } from '../../../src/taps/route-table.js';
import { UsageChunkStripper, UsageInjector, withUsageRequested } from '../../../src/proxy/usage-injection.js';

describe('request rewriting', () => {
  it('splices stream_options in after the brace, leaving every other byte as the client wrote it', () => {
    const body = Buffer.from('{ "model": "m", "seed": 12345678901234567890, "stream": true,\n  "messages": [] }');
    const rewritten = withUsageRequested(body);
    expect(rewritten?.toString()).toBe('{"stream_options":{"include_usage":true}, "model": "m", "seed": 12345678901234567890, "stream": true,\n  "messages": [] }');
    expect(JSON.parse(rewritten!.toString()).stream_options).toEqual({ include_usage: true });
  });

  it('merges include_usage into existing stream_options', () => {
    const rewritten = withUsageRequested(Buffer.from('{"stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":false}}'));
    expect(JSON.parse(rewritten!.toString())).toEqual({ stream: true, stream_options: { continuous_usage_stats: true, include_usage: true } });
  });

  it('leaves alone a request that already asks, does not stream, or is not a JSON object', () => {
    for (const body of ['{"stream":true,"stream_options":{"include_usage":true}}', '{"stream":false}', '{"model":"m"}', '[1]', 'not json', '']) {
      expect(withUsageRequested(Buffer.from(body)), body).toBeUndefined();
    }
  });

  it('leaves alone every stream_options a server may read as asking: vLLM defaults include_usage to true, pydantic reads "true" and 1 as true', () => {
    for (const options of ['{}', '{"continuous_usage_stats":true}', '{"include_usage":"true"}', '{"include_usage":1}', '{"include_usage":true,"continuous_usage_stats":false}']) {
      const body = `{"model":"m","stream":true,"stream_options":${options},"messages":[]}`;
      expect(withUsageRequested(Buffer.from(body)), body).toBeUndefined();
    }
  });

  it('asks for usage when the request says no: include_usage false or null, stream_options null', () => {
    for (const [options, expected] of [
      ['{"include_usage":false}', { include_usage: true }],
      ['{"include_usage":null,"continuous_usage_stats":true}', { include_usage: true, continuous_usage_stats: true }],
      ['null', { include_usage: true }],
    ] as const) {
      const rewritten = withUsageRequested(Buffer.from(`{"stream":true,"stream_options":${options}}`));
      expect(JSON.parse(rewritten!.toString()).stream_options, options).toEqual(expected);
    }
  });

  it('applies only to JSON POSTs routed to OpenAI chat or completions', () => {
    const injector = new UsageInjector(new RouteTable([{ path: '/llm/chat', protocol: 'openai-chat' }]));
    expect(injector.forRequest('POST', '/v1/chat/completions?x=1', 'application/json')).toBeDefined();
    expect(injector.forRequest('POST', '/v1/completions', 'application/json; charset=utf-8')).toBeDefined();
    expect(injector.forRequest('POST', '/llm/chat', 'application/json')).toBeDefined();
    expect(injector.forRequest('GET', '/v1/chat/completions', 'application/json')).toBeUndefined();
    expect(injector.forRequest('POST', '/v1/chat/completions', 'text/plain')).toBeUndefined();
    expect(injector.forRequest('POST', '/v1/chat/completions', undefined)).toBeUndefined();
    expect(injector.forRequest('POST', '/v1/messages', 'application/json')).toBeUndefined();
    expect(injector.forRequest('POST', '/v1/responses', 'application/json')).toBeUndefined();
  });
});

const usageOnly = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}';
const content = (text: string) => `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${text}"},"finish_reason":null}]}`;
const withUsage = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"z"},"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}';

function strip(pieces: readonly Buffer[]): string {
  const stripper = new UsageChunkStripper();
  const out = pieces.map((p) => stripper.write(p));
  out.push(stripper.end());
  return Buffer.concat(out).toString('utf8');
}

describe('usage-only chunk stripping', () => {
  it('removes only the usage-only event, at every split point, with LF, CRLF and CR line ends', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
      const e = (s: string) => `${s}${eol}${eol}`;
      const input = Buffer.from([e(content('a')), e(': keep-alive'), e(withUsage), e(content('é☕')), e(usageOnly), e('data: [DONE]')].join(''));
      const expected = [e(content('a')), e(': keep-alive'), e(withUsage), e(content('é☕')), e('data: [DONE]')].join('');
      expect(strip([input]), JSON.stringify(eol)).toBe(expected);
      for (let cut = 1; cut < input.length; cut++) {
        const got = strip([input.subarray(0, cut), input.subarray(cut)]);
        if (got !== expected) expect(got, `${JSON.stringify(eol)} cut at ${cut}`).toBe(expected);
      }
      // Byte by byte: each write resumes the scan of the event held so far.
      expect(strip(Array.from(input, (byte) => Buffer.from([byte]))), `${JSON.stringify(eol)} byte by byte`).toBe(expected);
      for (let size = 2; size < 40; size += 7) {
        const pieces = Array.from({ length: Math.ceil(input.length / size) }, (_, k) => input.subarray(k * size, (k + 1) * size));
        expect(strip(pieces), `${JSON.stringify(eol)} in pieces of ${size}`).toBe(expected);
      }
    }
  });

  it('forwards a chunk of whole events as the same bytes, without copying', () => {
    const chunk = Buffer.from(`${content('a')}\n\n${content('b')}\n\n`);
    expect(new UsageChunkStripper().write(chunk).buffer).toBe(chunk.buffer);
  });

  it('flushes an unfinished last event unchanged when the body ends', () => {
    expect(strip([Buffer.from(`${content('a')}\n\ndata: {"choices":[],"usage":{}}`)])).toBe(`${content('a')}\n\ndata: {"choices":[],"usage":{}}`);
  });

  it('removes the usage-only event when the body ends right after its blank line, a bare CR included (a line end the scan could not decide until the body ended)', () => {
    for (const [eol, blank] of [['\r', '\r'], ['\n', '\r'], ['\r\n', '\r'], ['\n', '\n'], ['\r\n', '\r\n']]) {
      const input = Buffer.from(`${content('a')}${eol}${eol}${usageOnly}${eol}${blank}`);
      const expected = `${content('a')}${eol}${eol}`;
      const label = JSON.stringify([eol, blank]);
      expect(strip([input]), label).toBe(expected);
      expect(strip(Array.from(input, (byte) => Buffer.from([byte]))), `${label} byte by byte`).toBe(expected);
    }
    // A CR that ends a line which is not blank leaves the event unfinished: flushed unchanged.
    expect(strip([Buffer.from(`${usageOnly}\r`)])).toBe(`${usageOnly}\r`);
    // A content event ending the same way stays.
    expect(strip([Buffer.from(`${content('a')}\r\r`)])).toBe(`${content('a')}\r\r`);
  });

  it('passes an event longer than 64 KiB through as it comes, holding none of it, and still removes the usage event after it, at every split around its ends', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
      const e = (s: string) => `${s}${eol}${eol}`;
      const long = `data: {"usage":"${'x'.repeat(70_000)}"}${eol}data: more`;
      const input = Buffer.from([e(content('a')), e(long), e(usageOnly), e('data: [DONE]')].join(''));
      const expected = [e(content('a')), e(long), e('data: [DONE]')].join('');
      const longStart = input.indexOf('data: {"usage"');
      const longEnd = longStart + Buffer.byteLength(e(long));
      for (const cut of [longStart + 10, longStart + 66_000, longStart + 69_990, longEnd - 3, longEnd - 2, longEnd - 1, longEnd, longEnd + 1]) {
        const stripper = new UsageChunkStripper();
        const first = stripper.write(input.subarray(0, cut));
        // Past 64 KiB of the event nothing of it waits: what came of it has gone out.
        if (cut > longStart + 66_000 && cut < longEnd - 2) expect(first.length, `${JSON.stringify(eol)} cut at ${cut}`).toBe(cut);
        const got = Buffer.concat([first, stripper.write(input.subarray(cut)), stripper.end()]).toString('utf8');
        if (got !== expected) expect(got, `${JSON.stringify(eol)} cut at ${cut}`).toBe(expected);
      }
    }
  });

  it('passes on a long event sent in small pieces: past its first 64 KiB each piece goes out as it comes, nothing more held or scanned again', () => {
    const stripper = new UsageChunkStripper();
    stripper.write(Buffer.from('data: {"x":"'));
    const piece = Buffer.alloc(4096, 0x61);
    let out = 0;
    for (let i = 0; i < 64; i++) out += stripper.write(piece).length;
    // 256 KiB sent: all but the first 64 KiB (held while it could still be the usage chunk) went out piece by piece.
    expect(out).toBeGreaterThanOrEqual(64 * 4096 - (64 << 10));
    expect(stripper.write(piece)).toBe(piece);
  });

  it('drops the Content-Length response header, which no longer holds', () => {
    expect(new UsageChunkStripper().responseHeaders(['Content-Type', 'text/event-stream', 'Content-Length', '99', 'X-A', 'b'])).toEqual(['Content-Type', 'text/event-stream', 'X-A', 'b']);
  });
});

describe('upstream request headers', () => {
  it('drop Expect and keep every other header as sent: repeats, case and order', () => {
    const injection = new UsageInjector(new RouteTable([])).forRequest('POST', '/v1/chat/completions', 'application/json')!;
    const sent = ['Host', 'h', 'X-Tag', 'a', 'Expect', '100-continue', 'x-tag', 'b', 'Content-Length', '10'];
    expect(injection.requestHeaders(sent)).toEqual(['Host', 'h', 'X-Tag', 'a', 'x-tag', 'b', 'Content-Length', '10']);
  });
});
