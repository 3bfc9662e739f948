/**
 * The only body the proxy itself ever writes to a client: an OpenAI-style error object, so client
 * libraries surface a readable message instead of failing to parse. Sent when the upstream cannot
 * be reached or answers what cannot be relayed (502), or sends nothing before the idle timeout (504).
 */
export function upstreamErrorBody(status: 502 | 504, message: string): string {
  return JSON.stringify({
    error: { message: `tokentap: ${message}`, type: 'upstream_error', param: null, code: status },
  });
}
