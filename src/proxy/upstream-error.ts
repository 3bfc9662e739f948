import type { ServerResponse } from 'node:http';

/**
 * The only body the proxy itself ever writes to a client: an OpenAI-style error object, so client
 * libraries surface a readable message instead of failing to parse. Sent when the upstream cannot
 * be reached (502) or sends nothing before the idle timeout (504).
 */
export function sendUpstreamError(res: ServerResponse, status: 502 | 504, message: string): void {
  const body = JSON.stringify({
    error: { message: `tokentap: ${message}`, type: 'upstream_error', param: null, code: status },
  });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
