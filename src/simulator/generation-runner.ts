import type { ServerResponse } from 'node:http';
import type { ChunkStep, GenerationPlan, Step } from './generation-plan.js';
import {
  JSON_CONTENT_TYPE,
  SSE_CONTENT_TYPE,
  SSE_DONE,
  chatCompletionBody,
  chatContentChunk,
  chatRoleChunk,
  chatUsageChunk,
  completionBody,
  completionChunk,
  completionUsageChunk,
  sseEvent,
  type ResponseIdentity,
  type TokenUsage,
} from './openai-wire.js';
import type { Api } from './request-body.js';

/**
 * Plays a GenerationPlan onto an HTTP response in real time: at most one timer per response, armed
 * for the next step's absolute target, and each SSE event in its own `res.write()` so it leaves as
 * its own HTTP chunk, as uvicorn sends every event vLLM yields.
 */

export interface ResponseShape {
  readonly api: Api;
  readonly stream: boolean;
  readonly identity: ResponseIdentity;
  readonly promptTokens: number;
  readonly rolePrelude: boolean;
  /** The usage-only chunk after the finish chunk. */
  readonly finalUsage: boolean;
  /** Cumulative usage on every chunk (stream_options.continuous_usage_stats). */
  readonly continuousUsage: boolean;
}

export type GenerationEnd = 'completed' | 'client-closed' | 'reset' | 'truncated';

/**
 * Starts playing `plan` onto `res`; `onEnd` is called exactly once: when the response is complete,
 * when a fault ends it, or when the connection closes first (the timer is cleared at once, so no
 * more work is done for a client that went away).
 */
export function runGeneration(
  res: ServerResponse,
  plan: GenerationPlan,
  shape: ResponseShape,
  startMs: number,
  onEnd: (end: GenerationEnd, tokensSent: number) => void,
): void {
  let next = 0;
  let tokensGenerated = 0;
  let timer: NodeJS.Timeout | undefined;
  let ended = false;

  const end = (how: GenerationEnd): void => {
    ended = true;
    clearTimeout(timer);
    // A JSON response delivers its tokens only with its body.
    const delivered = shape.stream || how === 'completed' || how === 'truncated';
    onEnd(how, delivered ? tokensGenerated : 0);
  };
  const usageSoFar = (): TokenUsage => ({ promptTokens: shape.promptTokens, completionTokens: tokensGenerated });

  const writeChunk = (step: ChunkStep): void => {
    tokensGenerated += step.tokens;
    const usage = shape.continuousUsage ? usageSoFar() : undefined;
    const json =
      shape.api === 'chat'
        ? chatContentChunk(shape.identity, step.text, step.finish, usage)
        : completionChunk(shape.identity, step.text, step.finish, usage);
    res.write(sseEvent(json));
    if (step.finish === null) return;
    if (shape.finalUsage) {
      const final = shape.api === 'chat' ? chatUsageChunk : completionUsageChunk;
      res.write(sseEvent(final(shape.identity, usageSoFar())));
    }
    res.write(SSE_DONE);
    res.end();
    end('completed');
  };

  const fullBody = (): string => {
    const text = plan.tokens.join('');
    const usage = { promptTokens: shape.promptTokens, completionTokens: plan.tokens.length };
    return shape.api === 'chat'
      ? chatCompletionBody(shape.identity, text, plan.finish, usage)
      : completionBody(shape.identity, text, plan.finish, usage);
  };

  /** Non-streaming: nothing leaves until the generation is done, as with vLLM's full generator. */
  const collectChunk = (step: ChunkStep): void => {
    tokensGenerated += step.tokens;
    if (step.finish === null) return;
    const body = fullBody();
    res.writeHead(200, { 'content-type': JSON_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) });
    res.end(body);
    end('completed');
  };

  /**
   * A JSON body cut just after the text of the tokens generated so far: a clean HTTP response whose
   * body does not parse, as when an upstream dies while writing it.
   */
  const truncatedBody = (): string => {
    const body = fullBody();
    const key = shape.api === 'chat' ? '"content":' : '"text":';
    const sentText = JSON.stringify(plan.tokens.slice(0, tokensGenerated).join(''));
    return body.slice(0, body.indexOf(key) + key.length + sentText.length - 1);
  };

  const perform = (step: Step): void => {
    switch (step.kind) {
      case 'chunk':
        if (shape.stream) writeChunk(step);
        else collectChunk(step);
        return;
      case 'reset': {
        // A response's writes are flushed on the next tick; resetting after them makes sure the
        // tokens written before the fault leave the process before the RST would discard them.
        const socket = res.socket;
        setImmediate(() => {
          if (socket !== null && !socket.destroyed) socket.resetAndDestroy();
        });
        end('reset');
        return;
      }
      case 'truncate':
        if (shape.stream) {
          res.end();
        } else {
          res.writeHead(200, { 'content-type': JSON_CONTENT_TYPE });
          res.end(truncatedBody());
        }
        end('truncated');
        return;
    }
  };

  /**
   * Performs every step that is due, then arms one timer for the next. A step already overdue (a
   * late timer, a busy event loop, itl 0) goes out at once, still as its own write.
   */
  const runDue = (): void => {
    timer = undefined;
    while (!ended) {
      const step = plan.steps[next];
      // Out of steps without an end: a stall, which lasts until the client leaves.
      if (step === undefined) return;
      const waitMs = startMs + step.atMs - performance.now();
      if (waitMs > 0) {
        timer = setTimeout(runDue, waitMs);
        return;
      }
      next += 1;
      perform(step);
    }
  };

  res.once('close', () => {
    if (!ended) end('client-closed');
  });

  if (shape.stream) {
    res.writeHead(200, { 'content-type': SSE_CONTENT_TYPE });
    if (shape.api === 'chat' && shape.rolePrelude) {
      const usage = shape.continuousUsage ? usageSoFar() : undefined;
      res.write(sseEvent(chatRoleChunk(shape.identity, usage)));
    } else {
      // uvicorn sends the status line and headers as soon as the response starts.
      res.flushHeaders();
    }
  }
  runDue();
}
