/**
 * A request's protocol-upgrade offer (RFC 9110 section 7.8), as the relay treats it. llhttp flags
 * an upgrade when a request carries `Upgrade` and `Connection: upgrade` (or is CONNECT).
 *
 * An offer of HTTP/2 over cleartext alone (`Upgrade: h2c`, what `curl --http2` sends on http://)
 * is declined by answering in HTTP/1.1: RFC 9110 section 7.8 lets a server ignore an Upgrade
 * field, and the inference servers behind tokentap (uvicorn for vLLM, llama-server, Ollama) do
 * exactly that. The request goes upstream without the offer: `Upgrade`, `HTTP2-Settings` (RFC 7540
 * section 3.2.1: connection-specific, for this connection only) and the `Connection` tokens naming
 * them are removed, so the upstream cannot take up an upgrade the relay would not carry.
 *
 * Any other protocol in the offer (`websocket`, `h2c, websocket`) is refused with 501 as before:
 * the client asked for a tunnel the relay does not provide, and declining only h2c would still
 * leave it a WebSocket handshake that can only fail.
 */

const H2C = 'h2c';
const UPGRADE = 'upgrade';
const HTTP2_SETTINGS = 'http2-settings';

/** Every protocol named by the request's `Upgrade` fields is h2c (and there is at least one). */
export function offersOnlyH2c(rawHeaders: readonly string[]): boolean {
  let offered = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() !== UPGRADE) continue;
    for (const protocol of (rawHeaders[i + 1] as string).split(',')) {
      const name = protocol.trim().toLowerCase();
      // Empty list elements are ignored (RFC 9110 section 5.6.1).
      if (name === '') continue;
      if (name !== H2C) return false;
      offered = true;
    }
  }
  return offered;
}

/** The request carries a `Transfer-Encoding` field: its body is chunked (or refused by the head rules). */
export function hasTransferEncoding(rawHeaders: readonly string[]): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).toLowerCase() === 'transfer-encoding') return true;
  return false;
}

/**
 * The request's headers without the h2c offer: no `Upgrade` or `HTTP2-Settings` field, and
 * `Connection` without the tokens naming them (a `Connection` left empty is dropped; `close` and
 * other tokens stay). Everything else in its order, case and bytes.
 */
export function withoutH2cOffer(rawHeaders: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const lower = name.toLowerCase();
    if (lower === UPGRADE || lower === HTTP2_SETTINGS) continue;
    const value = rawHeaders[i + 1] as string;
    if (lower !== 'connection') {
      kept.push(name, value);
      continue;
    }
    const tokens = value.split(',').filter((token) => {
      const option = token.trim().toLowerCase();
      return option !== '' && option !== UPGRADE && option !== HTTP2_SETTINGS;
    });
    if (tokens.length > 0) kept.push(name, tokens.map((token) => token.trim()).join(', '));
  }
  return kept;
}
