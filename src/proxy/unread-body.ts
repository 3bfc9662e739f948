/**
 * When an upstream may leave a request body unread, so that its bytes would be read as the next
 * request on the connection (pooled, that request's answer would go to the next client): the
 * relay then closes the connection after the answer instead of pooling it (exchange.ts for
 * HTTP/1.1 clients, h2/http1-upstream.ts for HTTP/2 streams to an HTTP/1.1 upstream).
 */

/**
 * Methods whose body every upstream reads. Content in a GET, HEAD, OPTIONS, DELETE... "has no
 * generally defined semantics" (RFC 9110 section 9.3.1), and servers skip it: cpp-httplib, llama.cpp's
 * server, read a body only for POST, PUT, PATCH and PRI (DELETE in some versions) until
 * yhirose/cpp-httplib@91271c0 (2026-05-15), whatever Content-Length said, taking it for the next request.
 */
export const BODY_READ_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH']);

/**
 * `100-continue` among one Expect field's expectations, read as loosely as any upstream may read it
 * (Node's server matches it anywhere in the joined fields). Read strictly, `Expect: x, 100-continue`
 * escaped the rule that closes a connection whose upstream may have declined the body.
 */
export function fieldAsksToContinue(expectField: string): boolean {
  return /(?:^|\W)100-continue(?:$|\W)/i.test(expectField);
}
