import type { ServerResponse } from 'node:http';
import { constants, type Http2Stream } from 'node:http2';
import type { ChunkStep, GenerationPlan, Step } from './generation-plan.js';
import type { ErrorResponse, Progress, ResponseWriter } from './protocol.js';

/**
 * Plays a GenerationPlan onto an HTTP response in real time, in any API's framing (the
 * ResponseWriter): at most one timer per response, armed for the next step's absolute target (or
 * the next keep-alive, whichever is first), and each event in its own `res.write()` so it leaves as
 * its own HTTP chunk, as uvicorn, axum and the others send every event their server yields.
 */

export interface RunOptions {
  readonly stream: boolean;
  /** Replace each token by its chunk's send time (`x-sim-stamp`). */
  readonly stamp: boolean;
  /** Idle ms before the writer's keep-alive comment, if it has one. */
  readonly keepAliveMs: number;
  /** Close the connection right after a stream's last chunk, having announced Keep-Alive (llama-server). */
  readonly closeAfterStream: boolean;
  /** Ms between a stream's terminal event and its chunked terminator, written apart (uvicorn); 0: together. */
  readonly terminatorDelayMs: number;
  /** performance.now() when the request body was received: the plan's time origin. */
  readonly startMs: number;
  /** The API's error body, for the `error` fault on a non-streaming request. */
  readonly serverError: () => ErrorResponse;
}

export type GenerationEnd = 'completed' | 'client-closed' | 'reset' | 'truncated' | 'errored';

/**
 * Starts playing `plan` onto `res`; `onEnd` is called exactly once: when the response is complete,
 * when a fault ends it, or when the connection closes first (the timer is cleared at once, so no
 * more work is done for a client that went away).
 */
export function runGeneration(
  res: ServerResponse,
  plan: GenerationPlan,
  writer: ResponseWriter,
  options: RunOptions,
  onEnd: (end: GenerationEnd, tokensSent: number) => void,
): void {
  const { stream, startMs } = options;
  /** Set when `res` is node:http2's compatibility response (the simulator's h2c listener). */
  const h2Stream = (res as { stream?: Http2Stream }).stream;
  // Over HTTP/2 a connection is shared by streams and its headers may not name it (RFC 9113
  // 8.2.2): llama-server's close after a stream is an HTTP/1.1 behaviour only.
  const closeAfterStream = options.closeAfterStream && h2Stream === undefined;
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  let lastWriteMs = startMs;
  // keep-alive 0 turns them off rather than sending one per millisecond.
  const keepAlive = stream && options.keepAliveMs > 0 ? writer.keepAlive : undefined;
  /** The text of every token generated so far, stamps included. */
  const generated: string[] = [];
  let firstTokenMs: number | undefined;
  const progress: Progress = {
    get tokens() {
      return generated.length;
    },
    text: () => generated.join(''),
    startMs,
    get firstTokenMs() {
      return firstTokenMs;
    },
  };

  const end = (how: GenerationEnd): void => {
    ended = true;
    clearTimeout(timer);
    // A JSON response delivers its tokens only with its body.
    const delivered = stream || how === 'completed' || how === 'truncated';
    onEnd(how, delivered ? generated.length : 0);
  };

  const write = (events: readonly string[]): void => {
    for (const event of events) res.write(event);
    lastWriteMs = performance.now();
  };

  /**
   * The step's tokens as sent. Stamped, each is the time taken just before its chunk is built and
   * written: `process.hrtime.bigint()` reads CLOCK_MONOTONIC, which every process on the machine
   * shares, so a client subtracting it from its own receive time gets the delivery delay.
   */
  const tokensOf = (step: ChunkStep): readonly string[] => {
    if (step.tokens === 0) return [];
    if (!options.stamp) return plan.tokens.slice(step.first, step.first + step.tokens);
    const stamp = `${process.hrtime.bigint()} `;
    return new Array<string>(step.tokens).fill(stamp);
  };

  const sendChunk = (step: ChunkStep): void => {
    const tokens = tokensOf(step);
    if (tokens.length > 0) {
      firstTokenMs ??= performance.now();
      generated.push(...tokens);
    }
    write(writer.step(tokens, step.finish, progress));
    if (step.finish === null) return;
    end('completed');
    if (options.terminatorDelayMs > 0) setTimeout(finishStream, options.terminatorDelayMs);
    else finishStream();
  };

  const finishStream = (): void => {
    if (res.destroyed) return;
    // Taken now: node:http detaches the socket from the response once it has finished.
    const socket = res.socket;
    res.end();
    // llama-server closes about 0.3 ms after its last chunk: the next turn of the event loop.
    if (closeAfterStream) res.once('finish', () => setImmediate(() => socket?.destroy()));
  };

  /** Non-streaming: nothing leaves until the generation is done, as with every server's full-response path. */
  const collectChunk = (step: ChunkStep): void => {
    if (step.tokens > 0) {
      firstTokenMs ??= performance.now();
      generated.push(...plan.tokens.slice(step.first, step.first + step.tokens));
    }
    if (step.finish === null) return;
    const { contentType, body } = fullBody(generated);
    res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
    end('completed');
  };

  const fullBody = (tokens: readonly string[]): { contentType: string; body: string } => {
    const stamped = options.stamp ? new Array<string>(tokens.length).fill(`${process.hrtime.bigint()} `) : tokens;
    return writer.body(stamped, plan.finish, progress);
  };

  /**
   * A body cut just after the text of the tokens generated so far: a clean HTTP response whose
   * body does not parse, as when an upstream dies while writing it. The body is built with every
   * planned token and cut where the generated text ends, so it works for any API's JSON.
   */
  const truncatedBody = (): { contentType: string; body: string } => {
    const { contentType, body } = fullBody(plan.tokens);
    const full = JSON.stringify(plan.tokens.join(''));
    const sent = JSON.stringify(generated.join(''));
    const at = body.indexOf(full);
    return { contentType, body: body.slice(0, (at < 0 ? 0 : at) + sent.length - 1) };
  };

  const perform = (step: Step): void => {
    switch (step.kind) {
      case 'chunk':
        if (stream) sendChunk(step);
        else collectChunk(step);
        return;
      case 'reset': {
        // A response's writes are flushed on the next tick; resetting after them makes sure the
        // tokens written before the fault leave the process before the RST would discard them.
        // Over HTTP/2 the stream is reset (RST_STREAM), not the connection its neighbours share.
        const socket = res.socket;
        setImmediate(() => {
          if (h2Stream !== undefined) {
            if (!h2Stream.destroyed) h2Stream.close(constants.NGHTTP2_INTERNAL_ERROR);
          } else if (socket !== null && !socket.destroyed) socket.resetAndDestroy();
        });
        end('reset');
        return;
      }
      case 'truncate':
        if (stream) {
          res.end();
        } else {
          const { contentType, body } = truncatedBody();
          res.writeHead(200, { 'content-type': contentType });
          res.end(body);
        }
        end('truncated');
        return;
      case 'error': {
        const message = `Simulated failure (x-sim-fault: error:${generated.length})`;
        if (stream) {
          write(writer.streamError(message, progress));
          res.end();
        } else {
          const { contentType, body } = options.serverError();
          res.writeHead(500, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
          res.end(body);
        }
        end('errored');
        return;
      }
    }
  };

  /**
   * Performs every step that is due, then arms one timer for the next step or keep-alive. A step
   * already overdue (a late timer, a busy event loop, itl 0) goes out at once, still as its own
   * write.
   */
  const runDue = (): void => {
    timer = undefined;
    while (!ended) {
      const now = performance.now();
      const step = plan.steps[next];
      // Out of steps without an end: a stall, which lasts until the client leaves.
      const waitMs = step === undefined ? Infinity : startMs + step.atMs - now;
      if (waitMs <= 0) {
        next += 1;
        perform(step as Step);
        continue;
      }
      // A keep-alive only when nothing else is due: an overdue step makes it pointless.
      if (keepAlive !== undefined && now - lastWriteMs >= options.keepAliveMs) write([keepAlive]);
      const idleMs = keepAlive === undefined ? Infinity : lastWriteMs + options.keepAliveMs - now;
      const delay = Math.min(waitMs, idleMs);
      if (delay !== Infinity) timer = setTimeout(runDue, Math.max(1, delay));
      return;
    }
  };

  res.once('close', () => {
    if (!ended) end('client-closed');
  });

  if (stream) {
    res.writeHead(200, closeAfterStream ? { 'keep-alive': 'timeout=5, max=100', 'content-type': writer.streamContentType } : { 'content-type': writer.streamContentType });
    const opening = writer.open();
    // With nothing to send yet, the head goes out alone, as every server sends it when the response starts.
    if (opening.length === 0) res.flushHeaders();
    else write(opening);
  }
  runDue();
}
