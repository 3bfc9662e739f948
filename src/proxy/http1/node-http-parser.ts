import { createRequire } from 'node:module';

/**
 * Node's own HTTP/1.1 parser (llhttp, the C parser behind node:http), used directly. The relay
 * (relay-server.ts) parses request heads and bodies and upstream response heads with it, so what it
 * accepts and rejects is exactly what node:http accepts and rejects (strict mode: no request
 * smuggling through lenient framing), without node:http's per-chunk stream objects.
 *
 * It is reached through `_http_common`, an undocumented module Node keeps for compatibility (it is
 * how node:http itself loads the parser). Why not a package: llhttp's npm package is a code
 * generator, not a runtime; http-parser-js is a slower, looser JavaScript parser. The callback
 * signatures used here are Node 20's and are pinned by test/unit/proxy/node-http-parser.test.ts.
 */

export interface NativeHttpParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  /** Bytes parsed, or an Error with `code` (llhttp's, such as HPE_INVALID_CHUNK_SIZE) and `bytesParsed`. */
  execute(data: Buffer): number | ParseError;
  /** End of input: an Error when a message was cut short. */
  finish(): number | ParseError | undefined;
  close(): void;
  [callback: number]: unknown;
}

export interface ParseError extends Error {
  readonly code: string;
  readonly bytesParsed: number;
  readonly reason?: string;
}

interface HttpParserClass {
  new (): NativeHttpParser;
  readonly REQUEST: number;
  readonly RESPONSE: number;
  readonly kOnMessageBegin: number;
  readonly kOnHeaders: number;
  readonly kOnHeadersComplete: number;
  readonly kOnBody: number;
  readonly kOnMessageComplete: number;
  readonly kOnExecute: number;
  readonly kLenientNone: number;
}

const common = createRequire(import.meta.url)('_http_common') as { HTTPParser: HttpParserClass; methods: readonly string[] };

export const HTTPParser = common.HTTPParser;
/** Method names by the index the parser reports. */
export const METHODS = common.methods;

/**
 * What kOnHeadersComplete returns to stop the parser right after the head: llhttp's "upgrade"
 * answer, which makes execute() return the head's length. The relay uses it on response heads, so
 * the body's bytes stay its own to forward unchanged.
 */
export const STOP_AFTER_HEAD = 2;

/**
 * The async-hooks resource the parser wants, one per initialize(). It must be a fresh, extensible
 * object: AsyncLocalStorage (OpenTelemetry's context manager uses one) writes the active store onto
 * the resource when the parser is initialized, so a frozen one throws inside the async hook, which
 * Node treats as fatal (the whole sidecar exits), and a shared one would hand one connection's
 * context to the callbacks of another.
 */
export function parserResource(): object {
  return {};
}

export function isParseError(result: unknown): result is ParseError {
  return result instanceof Error;
}
