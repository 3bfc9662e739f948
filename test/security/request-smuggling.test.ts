import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestSplitter, startCaptureUpstream } from '../helpers/capture-upstream.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { RawClient } from '../helpers/raw-http.js';
import { startTestSidecar } from '../helpers/sidecar.js';

/**
 * Request smuggling and desync, the classes of the HTTP/1.1 front-end literature (CL.TE, TE.CL,
 * TE.TE obfuscations, Connection-nominated framing, chunk-size tricks, bare CR/LF, obs-fold,
 * conflicting lengths, pipelining behind a malformed request). Each case asserts what the upstream
 * received byte for byte (a raw TCP capture), and that a strict parser (llhttp, as tokentap) and a
 * lenient one (llhttp with every lenient flag) split those bytes into the same messages: the
 * upstream can never see a request boundary tokentap did not decide.
 */

let upstream: Awaited<ReturnType<typeof startCaptureUpstream>>;
let sidecar: Awaited<ReturnType<typeof startTestSidecar>>;
const clients: RawClient[] = [];

beforeAll(async () => {
  upstream = await startCaptureUpstream();
  // A long idle timeout: a refusal that waited for it would fail the 2 s bound below.
  sidecar = await startTestSidecar(upstream.url, 'upstream_idle_timeout: 20s\n');
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sidecar?.close();
  await upstream?.close();
});

async function client(): Promise<RawClient> {
  const c = await RawClient.connect(sidecar.proxyUrl);
  clients.push(c);
  return c;
}

interface Response {
  readonly status: number;
  readonly head: string;
  readonly body: string;
}

/** The complete Content-Length-framed responses in `text` (every answer in this file has one). */
function responses(text: string): Response[] {
  const found: Response[] = [];
  let at = 0;
  for (;;) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    if (headEnd === -1) return found;
    const head = text.slice(at, headEnd + 2);
    const length = Number(/\r\ncontent-length: *(\d+)\r\n/i.exec(head)?.[1] ?? 0);
    if (text.length < headEnd + 4 + length) return found;
    found.push({ status: Number(head.slice(9, 12)), head, body: text.slice(headEnd + 4, headEnd + 4 + length) });
    at = headEnd + 4 + length;
  }
}

/** Sends `payload` on a new connection; returns the `count` responses and what the upstream received meanwhile. */
async function exchange(payload: string, count = 1): Promise<{ responses: Response[]; forwarded: string; closed: boolean; client: RawClient }> {
  upstream.mark();
  const c = await client();
  c.write(Buffer.from(payload, 'latin1'));
  await c.read((t) => responses(t).length >= count, 2_000);
  // A moment for anything tokentap would (wrongly) send after the answer.
  await new Promise((r) => setTimeout(r, 30));
  return { responses: responses(c.text()), forwarded: upstream.since(), closed: c.isClosed, client: c };
}

/** Both parsers split every connection's bytes alike, without error; returns the strict split of what arrived since mark(). */
function bothParsersAgree(): void {
  for (const connection of upstream.connections) {
    const strict = RequestSplitter.split(connection.bytes, false);
    const lenient = RequestSplitter.split(connection.bytes, true);
    expect(strict.error, `strict parser on upstream connection ${connection.id}`).toBeUndefined();
    expect(lenient.messages).toEqual(strict.messages);
  }
}

async function outcome(name: string): Promise<number> {
  return sumValues(await scrape(sidecar.adminUrl), 'tokentap_requests_total', { outcome: name });
}

const POST = 'POST /v1/echo HTTP/1.1\r\nHost: x\r\n';
const CHUNKED_AB = '2\r\nab\r\n0\r\n\r\n';

/** Payloads that must be refused before any byte goes upstream. */
const refused: Array<[string, string, number]> = [
  // CL.TE and TE.CL: both framings in one head.
  ['CL.TE: Content-Length before Transfer-Encoding', `${POST}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG`, 400],
  ['TE.CL: Transfer-Encoding before Content-Length', `${POST}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n`, 400],
  // TE.TE: a Transfer-Encoding one parser reads and another ignores.
  ['TE.TE: a space before the colon', `${POST}Transfer-Encoding : chunked\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: chunked, then a second Transfer-Encoding: x', `${POST}Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: Transfer-Encoding: x, then chunked (an unknown coding)', `${POST}Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`, 501],
  ['TE.TE: xchunked', `${POST}Transfer-Encoding: xchunked\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: xchunked beside a Content-Length', `${POST}Content-Length: 4\r\nTransfer-Encoding: xchunked\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: "chunked" quoted', `${POST}Transfer-Encoding: "chunked"\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: chunked, gzip (chunked not last)', `${POST}Transfer-Encoding: chunked, gzip\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: gzip, chunked (a coding tokentap does not implement; never forwarded without its gzip)', `${POST}Transfer-Encoding: gzip, chunked\r\n\r\n${CHUNKED_AB}`, 501],
  ['TE.TE: chunked, chunked', `${POST}Transfer-Encoding: chunked, chunked\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: a vertical tab before chunked', `${POST}Transfer-Encoding:\x0bchunked\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: a NUL after chunked', `${POST}Transfer-Encoding: chunked\x00\r\n\r\n${CHUNKED_AB}`, 400],
  ['TE.TE: identity beside a Content-Length', `${POST}Transfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nab`, 400],
  ['an empty Transfer-Encoding beside a Content-Length (RFC 9112 6.2: never both)', `${POST}Transfer-Encoding:\r\nContent-Length: 2\r\n\r\nab`, 400],
  ['Transfer-Encoding in an HTTP/1.0 request', `POST /v1/echo HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`, 400],
  // Conflicting and disguised lengths.
  ['Content-Length: 5, 5', `${POST}Content-Length: 5, 5\r\n\r\nhello`, 400],
  ['Content-Length: 5, 6', `${POST}Content-Length: 5, 6\r\n\r\nhello`, 400],
  ['Content-Length: +5', `${POST}Content-Length: +5\r\n\r\nhello`, 400],
  ['Content-Length: -5', `${POST}Content-Length: -5\r\n\r\nhello`, 400],
  ['two Content-Length fields, equal', `${POST}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello`, 400],
  ['two Content-Length fields, different', `${POST}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`, 400],
  ['a Content-Length that overflows', `${POST}Content-Length: 99999999999999999999999\r\n\r\nhello`, 400],
  // Bare line ends and folding in the head.
  ['a bare LF after the request line', `POST /v1/echo HTTP/1.1\nHost: x\r\nContent-Length: 0\r\n\r\n`, 400],
  ['a bare CR inside the head', `${POST}X-A: 1\rContent-Length: 5\r\n\r\nhello`, 400],
  ['obs-fold (a header continued on the next line)', `${POST}X-A: 1\r\n Content-Length: 5\r\nContent-Length: 0\r\n\r\nhello`, 400],
  // Heads nginx refuses that llhttp accepts.
  ['no Host header', 'GET /v1/echo HTTP/1.1\r\n\r\n', 400],
  ['two Host headers', 'GET /v1/echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400],
  ['a Host that is not a host[:port]', 'GET /v1/echo HTTP/1.1\r\nHost: a b, c\r\n\r\n', 400],
  ['HTTP/0.9', 'GET /v1/echo\r\n\r\n', 400],
  ['HTTP/2.0 as text', 'GET /v1/echo HTTP/2.0\r\nHost: x\r\n\r\n', 505],
  ['the * target outside OPTIONS', 'GET * HTTP/1.1\r\nHost: x\r\n\r\n', 400],
  ['an absolute-form target with userinfo', 'GET http://u:SECRET@x/v1/echo HTTP/1.1\r\nHost: x\r\n\r\n', 400],
  ['an absolute-form target of another scheme', 'GET ftp://x/v1/echo HTTP/1.1\r\nHost: x\r\n\r\n', 400],
  ['an origin-form target with a fragment', 'POST /v1/chat/completions#x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n', 400],
];

/** Body errors: the head was accepted and forwarded, the body is not chunked framing. */
const brokenBodies: Array<[string, string]> = [
  ['a chunk size that is not hex (zz)', 'zz\r\n'],
  ['a chunk size with 0x', '0x2\r\nab\r\n0\r\n\r\n'],
  ['a negative chunk size', '-2\r\nab\r\n0\r\n\r\n'],
  ['a chunk size that overflows', 'FFFFFFFFFFFFFFFFF2\r\nab\r\n0\r\n\r\n'],
  ['a space after the chunk size', '2 \r\nab\r\n0\r\n\r\n'],
  ['a space before the chunk size', ' 2\r\nab\r\n0\r\n\r\n'],
  ['a chunk extension with a quoted CR LF', '2;a="b\r\nc"\r\nab\r\n0\r\n\r\n'],
  ['a chunk extension ; without a name', '2;\r\nab\r\n0\r\n\r\n'],
  ['a bare LF in a chunk extension', '2;a\nb\r\nab\r\n0\r\n\r\n'],
  ['a bare LF after the chunk size', '2\nab\r\n0\r\n\r\n'],
  ['a bare LF after the chunk data', '2\r\nab\n0\r\n\r\n'],
  ['chunk data longer than its size', '2\r\nabc\r\n0\r\n\r\n'],
  ['a Content-Length in the trailer section', '2\r\nab\r\n0\r\nContent-Length: 9\r\n\r\n'],
];

describe('request smuggling: what cannot be framed is refused, and nothing reaches the upstream', () => {
  for (const [attack, payload, status] of refused) {
    it(`refuses ${attack} with ${status}, forwards nothing, closes, and counts client_error`, async () => {
      const before = await outcome('client_error');
      const result = await exchange(payload);
      expect(result.responses.map((r) => r.status)).toEqual([status]);
      expect(result.responses[0]!.head).toContain('Connection: close\r\n');
      await result.client.readToClose(2_000);
      expect(result.forwarded).toBe('');
      expect(await outcome('client_error')).toBe(before + 1);
      bothParsersAgree();
    });
  }
});

describe('request smuggling: a malformed body fails fast', () => {
  for (const [attack, body] of brokenBodies) {
    it(`answers ${attack} with 400 at once (not at upstream_idle_timeout), destroys the upstream connection holding the partial request, and counts client_error`, async () => {
      const before = await Promise.all([outcome('client_error'), outcome('timeout')]);
      const started = performance.now();
      const result = await exchange(`${POST}Transfer-Encoding: chunked\r\n\r\n${body}`);
      expect(result.responses.map((r) => r.status)).toEqual([400]);
      expect(result.responses[0]!.body).toMatch(/^tokentap: malformed request \(HPE_/);
      await result.client.readToClose(2_000);
      // Generous for a loaded 2-core machine, and far below the 20 s idle timeout.
      expect(performance.now() - started).toBeLessThan(2_000);
      // The head may have gone upstream before the body broke (or not, when the connection was
      // still opening); a connection that got any of it is closed, never reused.
      if (result.forwarded !== '') expect(result.forwarded.startsWith(`${POST}Transfer-Encoding: chunked\r\n\r\n`)).toBe(true);
      const carrying = upstream.touched();
      expect(carrying.length).toBeLessThanOrEqual(1);
      for (const connection of carrying) await expect.poll(() => connection.closed, { timeout: 2_000 }).toBe(true);
      // The upstream never parsed a complete request out of the partial one.
      expect(RequestSplitter.split(Buffer.from(result.forwarded, 'latin1'), false).messages).toEqual([]);
      const after = await Promise.all([outcome('client_error'), outcome('timeout')]);
      expect(after).toEqual([before[0] + 1, before[1]]);
    });
  }
});

describe('request smuggling: what is accepted goes upstream framed by tokentap', () => {
  const accepted: Array<[string, string, string]> = [
    ['forwards a Content-Length body under the length tokentap validated', `${POST}Content-Length: 5\r\n\r\nhello`, `${POST}Content-Length: 5\r\n\r\nhello`],
    ['forwards a Content-Length with leading whitespace as a clean Content-Length', `${POST}Content-Length:   5\r\n\r\nhello`, `${POST}Content-Length: 5\r\n\r\nhello`],
    ['forwards TRANSFER-ENCODING: CHUNKED (case) as chunked', `${POST}TRANSFER-ENCODING: CHUNKED\r\n\r\n${CHUNKED_AB}`, `${POST}Transfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`],
    ['forwards a tab before chunked as chunked', `${POST}Transfer-Encoding:\tchunked\r\n\r\n${CHUNKED_AB}`, `${POST}Transfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`],
    ['forwards chunk sizes with leading zeros re-framed', `${POST}Transfer-Encoding: chunked\r\n\r\n0002\r\nab\r\n000\r\n\r\n`, `${POST}Transfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`],
    ['forwards a chunk extension without it (tokentap frames the chunks)', `${POST}Transfer-Encoding: chunked\r\n\r\n2;name=value\r\nab\r\n0\r\n\r\n`, `${POST}Transfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`],
    ['forwards no request trailer fields', `${POST}Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\nX-Checksum: 9\r\n\r\n`, `${POST}Transfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`],
    ['forwards no Content-Length named by Connection: the body keeps its length', `${POST}Connection: Content-Length\r\nContent-Length: 2\r\n\r\nab`, `${POST}Content-Length: 2\r\n\r\nab`],
    ['forwards no Transfer-Encoding named by Connection without its framing', `${POST}Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`, `${POST}Transfer-Encoding: chunked\r\n\r\n${CHUNKED_AB}`],
    ['keeps the Host named by Connection: Host', 'GET /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: Host\r\n\r\n', 'GET /v1/echo HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['removes what Connection names when it frames and routes nothing', 'GET /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: x-hop\r\nX-Hop: 1\r\nX-End: 2\r\n\r\n', 'GET /v1/echo HTTP/1.1\r\nHost: x\r\nX-End: 2\r\n\r\n'],
    ['forwards OPTIONS * as it came', 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n', 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['reduces an absolute-form target to origin-form, with the Host of the target (RFC 9112 3.2.2)', 'GET http://model.example:8000/v1/echo?key=1 HTTP/1.1\r\nHost: other\r\n\r\n', 'GET /v1/echo?key=1 HTTP/1.1\r\nHost: model.example:8000\r\n\r\n'],
    ['gives an HTTP/1.0 request without Host the Host an HTTP/1.1 upstream needs', 'GET /v1/echo HTTP/1.0\r\n\r\n', 'GET /v1/echo HTTP/1.1\r\nHost: {upstream}\r\n\r\n'],
  ];
  for (const [behaviour, payload, expected] of accepted) {
    it(behaviour, async () => {
      const result = await exchange(payload);
      expect(result.responses.map((r) => r.status)).toEqual([200]);
      expect(result.forwarded).toBe(expected.replace('{upstream}', new URL(upstream.url).host));
      // Exactly one request upstream, whichever parser reads it.
      const strict = RequestSplitter.split(Buffer.from(result.forwarded, 'latin1'), false);
      const lenient = RequestSplitter.split(Buffer.from(result.forwarded, 'latin1'), true);
      expect(strict.messages).toHaveLength(1);
      expect(lenient.messages).toEqual(strict.messages);
      bothParsersAgree();
    });
  }

  it('never forwards Content-Length and Transfer-Encoding together, whatever the client sent', () => {
    for (const connection of upstream.connections) {
      for (const message of RequestSplitter.split(connection.bytes, false).messages) {
        const names = message.headers.map(([n]) => n.toLowerCase());
        expect(names.includes('content-length') && names.includes('transfer-encoding')).toBe(false);
      }
    }
  });
});

describe('request smuggling across clients', () => {
  // The payload, byte for byte: its 42-byte smuggled GET under a length of 44, so the
  // body takes the first 2 bytes the attacker sends next.
  const attack = 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 44\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: smuggled\r\n\r\n';
  const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: smuggled\r\n\r\n\r\n';
  const victimRequest = 'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer victim\r\n\r\n';

  it("stops the issue's Connection: Content-Length payload: the smuggled GET stays the body, and the victim's Bearer token never reaches the attacker", async () => {
    expect(smuggled).toHaveLength(44);
    upstream.mark();
    const attacker = await client();
    attacker.write(attack);
    await new Promise((r) => setTimeout(r, 30));
    attacker.write('\r\n');
    await attacker.read((t) => responses(t).length >= 1);
    // The next client reuses the pooled upstream connection the attacker's request went on.
    const victim = await client();
    victim.write(victimRequest);
    await victim.read((t) => responses(t).length >= 1);
    await new Promise((r) => setTimeout(r, 50));
    const [attackerAnswer] = responses(attacker.text());
    const [victimAnswer] = responses(victim.text());
    expect(JSON.parse(attackerAnswer!.body)).toEqual({ method: 'POST', target: '/v1/chat/completions', authorization: null, body: smuggled });
    expect(JSON.parse(victimAnswer!.body)).toEqual({ method: 'GET', target: '/v1/models', authorization: 'Bearer victim', body: '' });
    expect(attacker.text()).not.toContain('victim');
    expect(upstream.since()).toBe(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n\r\n${smuggled}GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer victim\r\n\r\n`);
    const seen = upstream.touched().flatMap((c) => RequestSplitter.split(c.bytes, true).messages.map((m) => m.target));
    expect(seen).not.toContain('/smuggled');
    bothParsersAgree();
  });

  it('stops Connection: close, content-length with a smuggled request left open for the next client to fill', async () => {
    const open = 'POST /smuggled HTTP/1.1\r\nHost: smuggled\r\nContent-Length: 200\r\n\r\n';
    upstream.mark();
    const attacker = await client();
    attacker.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close, content-length\r\nContent-Length: ${open.length}\r\n\r\n${open}`);
    await attacker.readToClose();
    const victim = await client();
    victim.write(victimRequest);
    await victim.read((t) => responses(t).length >= 1);
    expect(JSON.parse(responses(attacker.text())[0]!.body).body).toBe(open);
    expect(JSON.parse(responses(victim.text())[0]!.body)).toMatchObject({ target: '/v1/models', authorization: 'Bearer victim' });
    expect(attacker.text()).not.toContain('victim');
    const targets = upstream.touched().flatMap((c) => RequestSplitter.split(c.bytes, true).messages.map((m) => m.target));
    expect(targets).not.toContain('/smuggled');
    bothParsersAgree();
  });

  it('forwards nothing pipelined behind a malformed request, and still answers what came before it', async () => {
    const before = `GET /v1/echo HTTP/1.1\r\nHost: x\r\n\r\n`;
    const behind = 'GET /v1/behind HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer victim\r\n\r\n';
    const result = await exchange(`${before}${POST}Transfer-Encoding: chunked\r\n\r\nzz\r\n${behind}`, 2);
    expect(result.responses.map((r) => r.status)).toEqual([200, 400]);
    await result.client.readToClose(2_000);
    expect(result.forwarded.startsWith(before)).toBe(true);
    expect(result.forwarded).not.toContain('/v1/behind');
    expect(result.forwarded).not.toContain('victim');
  });

  it("carries no request trailer field into the next request's head", async () => {
    const result = await exchange(`${POST}Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\nAuthorization: Bearer attacker\r\n\r\nGET /v1/next HTTP/1.1\r\nHost: x\r\n\r\n`, 2);
    expect(result.responses.map((r) => r.status)).toEqual([200, 200]);
    expect(JSON.parse(result.responses[1]!.body)).toEqual({ method: 'GET', target: '/v1/next', authorization: null, body: '' });
    expect(result.forwarded).not.toContain('attacker');
    bothParsersAgree();
  });

  it('forwards nothing pipelined behind a refused head', async () => {
    const result = await exchange(`GET * HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/behind HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(result.responses.map((r) => r.status)).toEqual([400]);
    await result.client.readToClose(2_000);
    expect(result.forwarded).toBe('');
  });
});
