import { LimitCounters } from '../metrics/limit-counters.js';
import type { RouteTable } from '../taps/route-table.js';
import { HeldBytesBudget } from './held-bytes.js';
import { isCoded } from './content-coding.js';
import { withoutHeader } from './hop-by-hop.js';
import { GrowableBytes } from '../bytes/growable-bytes.js';

/**
 * Opt-in usage injection (`inject_usage: true`, DESIGN.md section 4): OpenAI-style streams report
 * token usage only when the request asks `stream_options.include_usage`. For streaming chat and
 * completions requests that do not ask, the request body is rewritten to ask, so token counts are
 * exact; and the usage-only chunk that this adds at the end (`"choices": []` plus `usage`) is removed
 * from the response, because naive clients read `chunk.choices[0]` and would break on it. The tap
 * still sees the original bytes, chunk included. A client that asked itself is left alone and
 * keeps its chunk.
 *
 * Costs, paid only by the requests it applies to: the request body is held until complete (to set
 * its Content-Length) and the response is cut at event boundaries (a partial event waits for its
 * end, which a client could not use anyway). Every other request takes the proxy's plain path.
 */

/** Where a held request goes: the relay's upstream request (exchange.ts). */
export interface UpstreamRequestBody {
  /** Sends the request head: with `contentLength` set, in place of the client's framing; else the client's own. */
  head(contentLength: number | undefined): void;
  write(chunk: Buffer): void;
  end(): void;
}

/** Bodies larger than this are forwarded unchanged: chat requests are far smaller (limits.rewritten_body_bytes by default). */
export const MAX_REWRITTEN_BODY_BYTES = 8 << 20;

/** The per-body cap, the budget shared with the model sniffer, and the counters of both tripping. */
export interface InjectionLimits {
  readonly maxBytes: number;
  readonly budget: HeldBytesBudget;
  readonly counters: LimitCounters;
}

export class UsageInjector {
  private readonly routes: RouteTable;
  private readonly limits: InjectionLimits;

  constructor(routes: RouteTable, limits?: InjectionLimits) {
    this.routes = routes;
    this.limits = limits ?? { maxBytes: MAX_REWRITTEN_BODY_BYTES, budget: new HeldBytesBudget(Number.MAX_SAFE_INTEGER), counters: new LimitCounters() };
  }

  /** The injection for one request, or undefined when it cannot apply (then the proxy path is untouched). */
  forRequest(method: string, url: string, contentType: string | undefined): RequestInjection | undefined {
    if (method !== 'POST' || contentType === undefined || !/\bjson\b/i.test(contentType)) return undefined;
    const query = url.indexOf('?');
    const protocol = this.routes.protocolFor(method, query === -1 ? url : url.slice(0, query));
    return protocol === 'openai-chat' || protocol === 'openai-completions' ? new RequestInjection(this.limits) : undefined;
  }
}

/** One request's body, held for rewriting, and what it implies for the response. */
export class RequestInjection {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** The body outgrew the cap: what was held went upstream unchanged, the rest streams through. */
  private passthrough = false;
  /** The request was rewritten to ask for usage, so the usage-only chunk is not the client's. */
  private rewritten = false;
  private readonly limits: InjectionLimits;

  constructor(limits: InjectionLimits) {
    this.limits = limits;
  }

  /**
   * The upstream request headers (already filtered to end-to-end ones) for a request that may be
   * rewritten. `Expect` is dropped: the upstream must not answer 100-continue to a Content-Length
   * that the rewrite changes; tokentap answers the client's 100-continue itself.
   */
  requestHeaders(headers: readonly string[]): string[] {
    return withoutHeader(headers, 'expect');
  }

  /**
   * Holds a request body chunk. Returns false when the caller must write `chunk` itself: the body
   * outgrew the cap, so the request head (with the client's own framing) and what was held have
   * just been sent to `upstream` unchanged.
   */
  hold(chunk: Buffer, upstream: UpstreamRequestBody): boolean {
    if (this.passthrough) return false;
    const tooLarge = this.heldBytes + chunk.length > this.limits.maxBytes;
    if (tooLarge || !this.limits.budget.take(chunk.length)) {
      // Past the per-body cap, or the budget across requests is spent: forwarded unrewritten, not held.
      this.limits.counters.tripped(tooLarge ? 'rewritten_body_bytes' : 'held_body_bytes');
      this.passthrough = true;
      upstream.head(undefined);
      for (const part of this.held) upstream.write(part);
      this.discard();
      return false;
    }
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    return true;
  }

  /** The request body ended: sends the held body, rewritten when it asks for a stream without usage. */
  send(upstream: UpstreamRequestBody): void {
    if (this.passthrough) {
      upstream.end();
      return;
    }
    const original = Buffer.concat(this.held, this.heldBytes);
    this.discard();
    const body = withUsageRequested(original) ?? original;
    this.rewritten = body !== original;
    // Sent under its own Content-Length: the rewritten length, or the held body's (the client may have chunked it).
    upstream.head(body.length);
    upstream.write(body);
    upstream.end();
  }

  /** Lets go of the held body (sent, passed through, or the request was cut) and holds nothing more; gives its bytes back to the budget. */
  discard(): void {
    this.passthrough = true;
    this.held = [];
    this.limits.budget.give(this.heldBytes);
    this.heldBytes = 0;
  }

  /**
   * A stripper for the response, when it is a successful event stream answering a rewritten request;
   * undefined otherwise (the response then passes unchanged). A coded stream (Content-Encoding gzip...)
   * has no blank lines to cut at: the stripper held all of it to its end (a 20-token gzip stream over
   * 1 s reached the client in one read at 1039 ms), so it passes unchanged, usage chunk included.
   */
  responseStripper(status: number, contentType: string | undefined, contentEncoding?: string): UsageChunkStripper | undefined {
    if (!this.rewritten || status < 200 || status >= 300 || isCoded(contentEncoding)) return undefined;
    if (contentType === undefined || contentType.split(';', 1)[0]!.trim().toLowerCase() !== 'text/event-stream') return undefined;
    return new UsageChunkStripper();
  }
}

/**
 * The body with `stream_options.include_usage: true`, or undefined when it should go unchanged: not
 * a JSON object, not `stream: true`, a `stream_options` object whose `include_usage` is anything
 * but `false` or `null` (absent included: a server may default it to true), or a `stream_options`
 * that is neither an object nor null (`[1, {...}]`, a string: the upstream decides what that means;
 * turning an array into an object changed the request's meaning).
 *
 * Every edit is a splice of bytes; nothing the client wrote is re-serialised, so every other byte
 * stays as written (numbers beyond 2^53 inside `stream_options` too, key order, spacing, bytes that
 * are not UTF-8):
 *   - no `stream_options`: `"stream_options":{"include_usage":true},` after the body's opening brace;
 *   - `"stream_options": null` (OpenAI's "no options"): the null replaced by `{"include_usage":true}`;
 *   - an object whose `include_usage` is `false` or `null`: that value replaced by `true`.
 */
export function withUsageRequested(body: Buffer): Buffer | undefined {
  let request: unknown;
  try {
    request = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) return undefined;
  const fields = request as { stream?: unknown; stream_options?: unknown };
  if (fields.stream !== true) return undefined;
  const options = fields.stream_options;
  if (options === undefined) {
    // The object has at least `stream`, so a comma always follows the inserted member.
    const brace = body.indexOf(0x7b);
    return splice(body, brace + 1, brace + 1, '"stream_options":{"include_usage":true},');
  }
  if (options !== null && (typeof options !== 'object' || Array.isArray(options))) return undefined;
  // Only a request that says no is asked: vLLM's StreamOptions defaults include_usage to true (an
  // object without it, `{}` or `{"continuous_usage_stats": true}`, already asks there), and
  // pydantic's lax mode reads "true" or 1 as true. Rewritten, such a request lost the usage chunk
  // it would have had (the stripper removes it).
  const include = options === null ? null : (options as { include_usage?: unknown }).include_usage;
  if (include !== false && include !== null) return undefined;
  // Found in the bytes, never re-serialised: JSON.stringify rounded integers beyond 2^53, made
  // invalid UTF-8 U+FFFD, and overflowed V8's stack on a nesting 5,000 deep (measured), which reset
  // the client.
  const span = lastTopLevelValue(body, STREAM_OPTIONS_KEY);
  // The key written with escapes (`"stream\u005foptions"`): forwarded unchanged rather than guessed at.
  if (span === undefined) return undefined;
  if (options === null) return splice(body, span.start, span.end, '{"include_usage":true}');
  const member = lastTopLevelValue(body.subarray(span.start, span.end), INCLUDE_USAGE_KEY);
  // Written with escapes: unchanged, as above.
  if (member === undefined) return undefined;
  return splice(body, span.start + member.start, span.start + member.end, 'true');
}

/** `body` with the bytes [start, end) replaced by `text`. */
function splice(body: Buffer, start: number, end: number, text: string): Buffer {
  return Buffer.concat([body.subarray(0, start), Buffer.from(text), body.subarray(end)]);
}

const STREAM_OPTIONS_KEY = Buffer.from('"stream_options"');
const INCLUDE_USAGE_KEY = Buffer.from('"include_usage"');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isJsonSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/**
 * Where the value of the last top-level member named by `rawKey` (a JSON string, as written) lies
 * in `body`, a JSON object JSON.parse has accepted; the last, because JSON.parse (and Python's
 * json) take the last of repeated keys. One pass, no recursion (the nesting is the client's).
 * Structural bytes are ASCII, so multi-byte UTF-8 and invalid bytes inside strings never match.
 */
function lastTopLevelValue(body: Buffer, rawKey: Buffer): { start: number; end: number } | undefined {
  let found: { start: number; end: number } | undefined;
  let depth = 0;
  let expectKey = false;
  let keyMatched = false;
  let valueStart = -1;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i] as number;
    if (byte === QUOTE) {
      const start = i;
      for (i++; body[i] !== QUOTE; i++) if (body[i] === BACKSLASH) i++;
      if (depth === 1 && expectKey) {
        keyMatched = i + 1 - start === rawKey.length && rawKey.equals(body.subarray(start, i + 1));
        expectKey = false;
      }
    } else if (byte === 0x7b || byte === 0x5b) {
      if (++depth === 1) expectKey = true;
    } else if (depth === 1 && byte === 0x3a) {
      if (keyMatched) valueStart = i + 1;
    } else if (depth === 1 && (byte === 0x2c || byte === 0x7d)) {
      if (valueStart !== -1) {
        let start = valueStart;
        let end = i;
        while (isJsonSpace(body[start])) start++;
        while (isJsonSpace(body[end - 1])) end--;
        found = { start, end };
      }
      valueStart = -1;
      keyMatched = false;
      expectKey = true;
      if (byte === 0x7d) depth--;
    } else if (byte === 0x7d || byte === 0x5d) {
      depth--;
    }
  }
  return found;
}

const LF = 10;
const CR = 13;

/**
 * The longest unfinished event held to see whether it is the usage chunk (a few hundred bytes: a
 * usage object and, with vLLM's per-request metrics, a few timings); a longer one is passed on.
 */
const MAX_HELD_EVENT_BYTES = 64 << 10;

/**
 * Removes the usage-only chunk (`"choices": []` with `usage`) from an OpenAI SSE response, passing
 * every other byte unchanged and in order. Works on bytes: events end at a blank line (LF, CRLF or
 * CR line ends); complete events go out at once, a partial one waits for its end (up to
 * MAX_HELD_EVENT_BYTES, past which it goes out as it comes); the tail of an unfinished last event
 * is flushed as is.
 */
export class UsageChunkStripper {
  /**
   * The start of an unfinished event (a copy: the proxy does not keep chunks), at most about
   * MAX_HELD_EVENT_BYTES, gathered into one growing buffer; `scanned` of its bytes have been read
   * for line ends and `lineStart` is where its current line starts, so each byte is read once
   * however the event is split (its bytes one by one cost 4.7 s of CPU for 65 KB when each read
   * was joined to the held start and read again from its first byte).
   */
  private readonly held = new GrowableBytes(MAX_HELD_EVENT_BYTES);
  private scanned = 0;
  private lineStart = 0;
  /**
   * Inside an event too long to be the usage chunk: its bytes go out as they come, up to the blank
   * line that ends it. `atLineStart`: the last byte passed ended a line; `afterCR`: it was a CR
   * (an LF next is the same line end).
   */
  private passing = false;
  private atLineStart = false;
  private afterCR = false;

  /** Response headers without Content-Length, which no longer holds once a chunk is removed. */
  responseHeaders(headers: string[]): string[] {
    return withoutHeader(headers, 'content-length');
  }

  /** The bytes of `chunk` to forward now (possibly none). */
  write(chunk: Buffer): Buffer {
    if (!this.passing) return this.scan(chunk);
    const end = this.passedEventEnd(chunk);
    if (end === -1) return chunk;
    this.passing = false;
    if (end === chunk.length) return chunk;
    const rest = this.scan(chunk.subarray(end));
    return rest.length === 0 ? chunk.subarray(0, end) : Buffer.concat([chunk.subarray(0, end), rest]);
  }

  /**
   * Where the passed event's blank line ends in `chunk` (the index after it), or -1 if `chunk`
   * does not reach it; the line state carries over to the next chunk.
   */
  private passedEventEnd(chunk: Buffer): number {
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (c === LF && this.afterCR) {
        this.afterCR = false;
        continue;
      }
      this.afterCR = c === CR;
      if (c !== LF && c !== CR) {
        this.atLineStart = false;
        continue;
      }
      if (!this.atLineStart) {
        this.atLineStart = true;
        continue;
      }
      // A blank line: a CR's LF, if it is in this chunk, goes with it.
      return c === CR && chunk[i + 1] === LF ? i + 2 : i + 1;
    }
    return -1;
  }

  /** The events of `chunk` (after what is held), the usage-only one removed. */
  private scan(chunk: Buffer): Buffer {
    const held = this.held;
    const resuming = held.length > 0;
    if (resuming) held.append(chunk);
    // Resuming, `data` is a view of the held buffer: what goes out is copied before it changes.
    const data = resuming ? held.view() : chunk;
    const out: Buffer[] = [];
    let eventStart = 0;
    let kept = 0;
    let lineStart = resuming ? this.lineStart : 0;
    let i = resuming ? this.scanned : 0;
    for (; i < data.length; i++) {
      const c = data[i];
      if (c !== LF && c !== CR) continue;
      if (c === CR && i + 1 === data.length) break; // maybe half of a CRLF: read again with the next byte
      const lineEnd = i;
      if (c === CR && data[i + 1] === LF) i++;
      if (lineEnd === lineStart) {
        // A blank line: the event [eventStart, i] is complete.
        if (eventStart < lineEnd && isUsageOnlyEvent(data.subarray(eventStart, lineEnd))) {
          if (kept < eventStart) out.push(data.subarray(kept, eventStart));
          kept = i + 1;
        }
        eventStart = i + 1;
      }
      lineStart = i + 1;
    }
    const scanEnd = Math.min(i, data.length);
    if (kept < eventStart) out.push(data.subarray(kept, eventStart));
    const passOn = data.length - eventStart > MAX_HELD_EVENT_BYTES;
    if (passOn) {
      // Too long for a usage chunk: what came of it goes out now, the rest as it comes. Held, it
      // grew without bound, and was copied and scanned again at every read (32 MB: 55 s of CPU).
      out.push(data.subarray(eventStart));
      // The line state from the event's start (a line start): only a CR the loop above left
      // undecided at the end can complete its blank line here, and then nothing is passed after it.
      this.atLineStart = true;
      this.afterCR = false;
      this.passing = this.passedEventEnd(data.subarray(eventStart)) === -1;
    }
    const forwarded = resuming ? Buffer.concat(out) : out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
    if (passOn || eventStart === data.length) {
      held.clear();
    } else if (resuming) {
      if (eventStart > 0) held.dropFirst(eventStart);
    } else {
      held.append(chunk.subarray(eventStart));
    }
    this.scanned = passOn ? 0 : scanEnd - eventStart;
    this.lineStart = passOn ? 0 : lineStart - eventStart;
    return forwarded;
  }

  /**
   * The body ended: whatever is left of an unfinished event goes out unchanged. A CR the scan left
   * undecided at the very end (it might have been half of a CRLF) ends its line now; when that line
   * is blank the held event is complete, and is removed if it is the usage-only one, as a client's
   * parser would have dispatched it.
   */
  end(): Buffer {
    const held = this.held.view();
    const last = held.length - 1;
    const completed = last > 0 && held[last] === CR && this.scanned === last && this.lineStart === last;
    const rest = completed && isUsageOnlyEvent(held.subarray(0, last)) ? Buffer.alloc(0) : Buffer.from(held);
    this.held.clear();
    this.scanned = 0;
    this.lineStart = 0;
    return rest;
  }
}

/** Only events that mention `usage` are parsed; the rest are skipped by a byte search. */
function isUsageOnlyEvent(event: Buffer): boolean {
  if (event.indexOf('"usage"') === -1) return false;
  let data = '';
  for (const line of event.toString('utf8').split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data += (data === '' ? '' : '\n') + line.slice(line.charCodeAt(5) === 32 ? 6 : 5);
  }
  try {
    const chunk = JSON.parse(data) as { choices?: unknown; usage?: unknown } | null;
    return chunk !== null && Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage != null;
  } catch {
    return false;
  }
}
