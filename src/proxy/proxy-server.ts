import http from 'node:http';
import { endToEndHeaders } from './hop-by-hop.js';
import { RequestBodySniffer } from './request-body-sniffer.js';
import { RequestMonitor, type MonitorDependencies } from './request-monitor.js';
import { UnobservedRequest } from './unobserved-request.js';
import { sendUpstreamError } from './upstream-error.js';
import type { UsageInjector } from './usage-injection.js';

export interface ProxyOptions {
  readonly upstream: URL;
  /** Silence from the upstream (before headers or between chunks) after which the request is cut as `timeout`. */
  readonly upstreamIdleTimeoutMs: number;
  readonly monitor: MonitorDependencies;
  /** False forwards without any observation (no RequestMonitor, no body sniffing): TOKENTAP_OBSERVE=off, for the benchmark. */
  readonly observe?: boolean;
  /** `inject_usage: true`: asks OpenAI streams for usage and hides the extra chunk (usage-injection.ts). */
  readonly usageInjection?: UsageInjector | undefined;
}

/**
 * The proxy listener: forwards every request to the upstream and every response byte back, as it
 * arrives, and hands the same bytes to a RequestMonitor beside the stream.
 *
 * Built on node:http directly rather than fastify + @fastify/http-proxy (the product design's first
 * choice): DESIGN.md section 9 measured that path at 70 ms of CPU per 1,000 streamed tokens without
 * any tap, against 20-24 ms for nginx, and most of it in the proxy path itself; here each body chunk
 * costs one 'data' callback and one write. It also lets the request body be read beside the
 * forwarded stream (for the model label) without re-serialising it. fastify serves the admin listener.
 */
export function createProxyServer(options: ProxyOptions): http.Server {
  // One keep-alive pool, unbounded: every concurrent stream gets its own upstream connection
  // immediately (a bounded pool queues stream N+1 behind N, inflating its TTFT).
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
  const { hostname, port } = options.upstream;
  const upstreamPort = port === '' ? 80 : Number(port);
  // Named in every failure the proxy reports (client error body, request log line).
  const upstreamAddress = `${hostname}:${upstreamPort}`;

  const server = http.createServer({ noDelay: true }, (req, res) => {
    const observe = options.observe !== false;
    const monitor = observe ? new RequestMonitor(options.monitor, req.method ?? 'GET', req.url ?? '/', req.headers) : new UnobservedRequest();
    const sniffer = observe ? new RequestBodySniffer(req.headers['content-type']) : undefined;
    const upstreamHeaders = endToEndHeaders(req.rawHeaders);
    monitor.trace(upstreamHeaders);
    // Undefined for every request unless inject_usage is on and this one is an OpenAI JSON POST.
    const injection = options.usageInjection?.forRequest(req.method ?? 'GET', req.url ?? '/', req.headers['content-type']);

    const upstreamReq = http.request({
      agent,
      hostname,
      port: upstreamPort,
      method: req.method,
      path: req.url,
      headers: injection === undefined ? upstreamHeaders : injection.requestHeaders(upstreamHeaders),
      setHost: false,
    });
    upstreamReq.setNoDelay(true);
    upstreamReq.setTimeout(options.upstreamIdleTimeoutMs, () => {
      if (monitor.finished) return;
      const detail = `upstream ${upstreamAddress} sent nothing for ${options.upstreamIdleTimeoutMs} ms (upstream_idle_timeout)`;
      monitor.fail('timeout', res.headersSent ? undefined : 504, detail);
      upstreamReq.destroy();
      if (res.headersSent) res.destroy();
      else sendUpstreamError(res, 504, detail);
    });

    upstreamReq.on('error', (error: NodeJS.ErrnoException) => {
      if (monitor.finished) return;
      const detail = `upstream ${upstreamAddress} connection ${res.headersSent ? 'broke mid-body' : 'failed'} (${error.code ?? error.message})`;
      monitor.fail('upstream_error', res.headersSent ? undefined : 502, detail);
      if (res.headersSent) res.destroy();
      else sendUpstreamError(res, 502, detail);
    });

    upstreamReq.on('response', (upstreamRes) => {
      const status = upstreamRes.statusCode ?? 502;
      monitor.response(status, upstreamRes.headers['content-type']);
      const stripper = injection?.responseStripper(status, upstreamRes.headers['content-type']);
      const headers = endToEndHeaders(upstreamRes.rawHeaders);
      try {
        res.writeHead(status, upstreamRes.statusMessage, stripper === undefined ? headers : stripper.responseHeaders(headers));
      } catch (error) {
        // Node's parser accepts what its server refuses to send (a status below 100, such as "099"):
        // the client gets a 502 naming it, instead of an uncaught exception ending every stream.
        const detail = `upstream ${upstreamAddress} sent a response that cannot be forwarded (${(error as Error).message})`;
        monitor.fail('upstream_error', 502, detail);
        upstreamReq.destroy();
        sendUpstreamError(res, 502, detail);
        return;
      }
      // Headers go out when the upstream's do, not with the first body byte.
      res.flushHeaders();

      upstreamRes.on('data', (chunk: Buffer) => {
        // Forward first, observe second: the client's byte is never behind the tap's work. The tap
        // sees the upstream's bytes, including a usage chunk stripped from the client's.
        const forwarded = stripper === undefined ? chunk : stripper.write(chunk);
        const writable = forwarded.length === 0 || res.write(forwarded);
        monitor.body(chunk);
        if (!writable) {
          upstreamRes.pause();
          res.once('drain', () => upstreamRes.resume());
        }
      });
      upstreamRes.on('end', () => {
        monitor.bodyEnd();
        const rest = stripper?.end();
        if (rest !== undefined && rest.length > 0) res.write(rest);
        res.end();
      });
      upstreamRes.on('close', () => {
        if (upstreamRes.complete || monitor.finished) return;
        // The upstream connection broke mid-body: the client must see a broken stream too, never a
        // clean end it would take for a complete answer.
        monitor.fail('upstream_error', undefined, `upstream ${upstreamAddress} closed the connection mid-body`);
        res.destroy();
      });
    });

    req.on('data', (chunk: Buffer) => {
      sniffer?.push(chunk);
      if (injection !== undefined && injection.hold(chunk, upstreamReq)) return;
      if (!upstreamReq.write(chunk)) {
        req.pause();
        upstreamReq.once('drain', () => req.resume());
      }
    });
    req.on('end', () => {
      monitor.requestBody(sniffer?.model());
      if (injection === undefined) upstreamReq.end();
      else injection.send(upstreamReq);
    });
    req.on('error', () => upstreamReq.destroy());

    res.on('finish', () => monitor.delivered());
    res.on('close', () => {
      if (res.writableFinished) return;
      // The client went away before the last byte: stop the upstream at once so the GPU stops too.
      if (!monitor.finished) monitor.fail('client_cancelled');
      upstreamReq.destroy();
    });
  });
  server.on('close', () => agent.destroy());
  return server;
}
