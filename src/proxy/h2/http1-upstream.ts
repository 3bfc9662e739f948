import { EventEmitter } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { OutgoingHttpHeaders } from 'node:http2';
import { endToEndHeaders } from '../hop-by-hop.js';
import { BODY_READ_METHODS, fieldAsksToContinue } from '../unread-body.js';
import { endToEndFields, fieldObject } from './h2-headers.js';

const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR } = http2.constants;

/**
 * HTTP/2 client streams forwarded to an HTTP/1.1 upstream (`upstream_protocol: http1`): each
 * stream is one HTTP/1.1 request on node:http's keep-alive agent, which frames the request body
 * itself (Content-Length or chunked; the client's framing fields never pass, h2-headers.ts) and
 * never sends a request twice (a reused connection that fails is the stream's 502). node:http, not
 * the HTTP/1.1 relay's own upstream pool: that pool is built around one client connection's
 * exchanges; this path carries HTTP/2 clients only, and its cost is measured apart.
 */
export class Http1Upstream {
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(host: string, port: number) {
    this.host = host;
    this.port = port;
    this.agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  }

  request(headers: OutgoingHttpHeaders, options: { endStream: boolean }): Http1Leg {
    return new Http1Leg(this.agent, this.host, this.port, headers, options.endStream);
  }

  /** Any request that reached an HTTP/1.1 upstream may have been processed: none is sent twice (StreamRelay asks). */
  mayHaveProcessed(_stream: object): boolean {
    return true;
  }

  provablyUnprocessed(_stream: object): boolean {
    return false;
  }

  /** A leg's 'end' is node:http's: the response's framing (length, chunked end or the close that delimits it) was complete. */
  endedWhole(_stream: object): boolean {
    return true;
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * One HTTP/1.1 exchange presented as the part of an HTTP/2 client stream the relay uses (the same
 * events and methods), so StreamRelay is one code path for both upstream protocols.
 */
export class Http1Leg extends EventEmitter {
  rstCode: number | undefined;
  private readonly req: http.ClientRequest;
  private res: http.IncomingMessage | undefined;
  private closed = false;

  constructor(agent: http.Agent, host: string, port: number, h2: OutgoingHttpHeaders, endStream: boolean) {
    super();
    const fields: OutgoingHttpHeaders = {};
    // TE is hop-by-hop in HTTP/1.1 (RFC 9110 section 10.1.4), and its `trailers` is the HTTP/2 client's.
    for (const name of Object.keys(h2)) if (!name.startsWith(':') && name !== 'te') fields[name] = h2[name];
    // The client's :authority is the Host the upstream sees, as an HTTP/1.1 client's Host is.
    fields.host = String(h2[':authority'] ?? `${host}:${port}`);
    const method = String(h2[':method']);
    // A stream that may carry DATA on a method other than POST, PUT or PATCH: node:http chunks a body
    // only for methods it expects one on, and wrote the DATA of a GET, HEAD, DELETE, OPTIONS or
    // TRACE after the head unframed, where the upstream read it as the next request (any HTTP/2
    // client smuggled a request, its answer going to the next stream on the kept-alive connection:
    // test/security/review-h2-body-framing.test.ts). It is chunked, and, since some servers read no
    // body on those methods whatever its framing (cpp-httplib, llama-server, until
    // yhirose/cpp-httplib@91271c0), sent on a connection of its own, closed after it, never pooled,
    // as on HTTP/1.1 (exchange.ts). (A `Connection: close` field alone is not enough: node:http
    // still pools the socket when the answer does not say close.) So is a request with `expect:
    // 100-continue`, whose body an upstream may decline by answering at once and then read as the
    // next request (the Expect desync; exchange.ts).
    const mayLeaveBodyUnread = !BODY_READ_METHODS.has(method) || fieldAsksToContinue(String(h2.expect ?? ''));
    const unpooled = !endStream && mayLeaveBodyUnread;
    if (unpooled && !BODY_READ_METHODS.has(method)) fields['transfer-encoding'] = 'chunked';
    this.req = http.request({ agent: unpooled ? false : agent, host, port, method, path: String(h2[':path']), headers: fields, setHost: false });
    this.req.on('response', (res: http.IncomingMessage) => {
      this.res = res;
      const headers = fieldObject(endToEndFields(endToEndHeaders(res.rawHeaders)), { ':status': res.statusCode ?? 502 });
      this.emit('response', headers, 0);
      res.on('data', (chunk: Buffer) => this.emit('data', chunk));
      res.on('end', () => {
        this.emit('end');
        this.finish(NGHTTP2_NO_ERROR);
      });
      res.on('close', () => {
        if (!res.complete) this.fail(new Error('the upstream closed the connection mid-response'));
      });
      res.on('error', () => {});
    });
    this.req.on('error', (error: Error) => this.fail(error));
    this.req.on('drain', () => this.emit('drain'));
    if (endStream) this.req.end();
  }

  get destroyed(): boolean {
    return this.closed;
  }

  get writableEnded(): boolean {
    return this.req.writableEnded;
  }

  write(chunk: Buffer): boolean {
    return this.req.write(chunk);
  }

  end(): void {
    this.req.end();
  }

  pause(): void {
    this.res?.pause();
  }

  resume(): void {
    this.res?.resume();
  }

  /** The client went away or the relay gave up: the upstream connection is closed (never pooled), so the engine stops. */
  close(code: number = NGHTTP2_CANCEL): void {
    this.req.destroy();
    this.finish(code);
  }

  destroy(error?: Error): void {
    this.close(error === undefined ? NGHTTP2_CANCEL : NGHTTP2_INTERNAL_ERROR);
  }

  private fail(error: Error): void {
    if (this.closed) return;
    this.emit('error', error);
    this.finish(NGHTTP2_INTERNAL_ERROR);
  }

  private finish(code: number): void {
    if (this.closed) return;
    this.closed = true;
    this.rstCode = code;
    this.emit('close');
  }
}
