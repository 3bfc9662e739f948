import type protobuf from 'protobufjs';
import type { TapContext } from '../tap.js';
import { cachedTokenCount, eventTokens, tokenCount } from '../upstream-numbers.js';
import type { GenerateResponseView } from './engine-protos.js';
import { GrpcMessageTap } from './grpc-message-tap.js';

/**
 * The streaming `Generate` of the engines served through smg-grpc-servicer (vLLM's `VllmEngine`,
 * SGLang's `SglangScheduler`, TensorRT-LLM's `TrtllmService`: proto/smg/), whose responses are a
 * `chunk` of new tokens or the `complete` final message of one output sequence.
 *
 * Content-bearing: a chunk with `token_ids`; it carries exactly `token_ids.length` tokens (bounded:
 * upstream-numbers.ts), so TTFT is the first chunk with tokens and per-token ITL is exact. A chunk
 * without tokens (the first one may carry only prompt logprobs) is not content.
 *
 * Counts: `prompt_tokens` and `cached_tokens` from any chunk or final message (the engine repeats
 * them), output tokens from the final messages' `completion_tokens`, summed over the sequences
 * (n > 1 sends one final message per sequence). The call ends with its grpc-status (trailers), not
 * with a message.
 */
export class GenerateStreamTap extends GrpcMessageTap {
  private readonly responseType: protobuf.Type;
  private completedOutputTokens = 0;

  constructor(context: TapContext, responseType: protobuf.Type) {
    super(context);
    this.responseType = responseType;
  }

  protected override onMessage(message: Buffer): void {
    const response = this.decode<GenerateResponseView>(this.responseType, message);
    if (response === undefined) return;
    const context = this.context;
    const timeline = context.timeline;
    const chunk = response.chunk;
    if (chunk != null) {
      const tokens = chunk.token_ids.length;
      if (tokens > 0) timeline.content(this.nowMs, eventTokens(tokens, 1, context));
      const input = tokenCount(chunk.prompt_tokens, context);
      timeline.usage(input, undefined, this.cached(chunk.cached_tokens, input));
      return;
    }
    const complete = response.complete;
    if (complete == null) return;
    const output = tokenCount(complete.completion_tokens, context);
    if (output !== undefined) {
      const total = tokenCount(this.completedOutputTokens + output, context);
      if (total !== undefined) this.completedOutputTokens = total;
    }
    const input = tokenCount(complete.prompt_tokens, context);
    timeline.usage(input, output === undefined ? undefined : this.completedOutputTokens, this.cached(complete.cached_tokens, input));
  }

  /** Cached input, never above the input of the same message (or the input reported before it): cachedTokenCount. */
  private cached(value: number | undefined, input: number | undefined): number | undefined {
    const reported = this.context.timeline.reportedInputTokens;
    return cachedTokenCount(value, input ?? (Number.isNaN(reported) ? undefined : reported), this.context);
  }
}
