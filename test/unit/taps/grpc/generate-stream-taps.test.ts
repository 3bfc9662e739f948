import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { ENGINE_PROTOS } from '../../../../src/taps/grpc/engine-protos.js';
import { createSglangGrpcTap } from '../../../../src/taps/sglang-grpc.js';
import type { TapFactory } from '../../../../src/taps/tap.js';
import { createTrtllmGrpcTap } from '../../../../src/taps/trtllm-grpc.js';
import { createVllmGrpcTap } from '../../../../src/taps/vllm-grpc.js';
import { encode, grpcFrame, runGrpcTap } from '../../../helpers/grpc-frames.js';
import { expectSameAtEveryCut, measurements } from '../replay.js';

/**
 * The three engines behind smg-grpc-servicer stream the same shape under their own packages and
 * field numbers: each case writes real messages with the engine's full proto (logprobs included,
 * which the taps skip) and checks what its tap measured.
 */
const ENGINES: ReadonlyArray<{ name: string; create: TapFactory; response: string; logprobs: (ids: number[]) => Record<string, unknown> }> = [
  {
    name: 'vLLM VllmEngine/Generate',
    create: createVllmGrpcTap,
    response: 'vllm.grpc.engine.GenerateResponse',
    logprobs: (ids) => ({ output_logprobs: { token_logprobs: ids.map(() => -0.5), token_ids: ids } }),
  },
  {
    name: 'SGLang SglangScheduler/Generate',
    create: createSglangGrpcTap,
    response: 'sglang.grpc.scheduler.GenerateResponse',
    logprobs: (ids) => ({ output_logprobs: { token_logprobs: ids.map(() => -0.5), token_ids: ids }, hidden_states: [0.25, 0.5] }),
  },
  {
    name: 'TensorRT-LLM TrtllmService/Generate',
    create: createTrtllmGrpcTap,
    response: 'trtllm.GenerateResponse',
    logprobs: (ids) => ({ logprobs: ids.map((id) => ({ token_id: id, logprob: -0.5 })) }),
  },
];

const OK = { 'grpc-status': '0' };

describe.each(ENGINES)('$name tap', ({ create, response, logprobs }) => {
  const chunk = (ids: number[], completion: number, extra: Record<string, unknown> = {}) =>
    grpcFrame(encode(response, { chunk: { token_ids: ids, prompt_tokens: 7, completion_tokens: completion, cached_tokens: 4, ...extra } }));
  const complete = (completion: number) => grpcFrame(encode(response, { complete: { finish_reason: 'stop', prompt_tokens: 7, completion_tokens: completion, cached_tokens: 4 } }));
  // Chunks at 100, 110, 120, 130 ms on the fake clock (runGrpcTap), the final message at 140 ms.
  const stream = [chunk([11], 1, logprobs([11])), chunk([12, 13, 14], 4), chunk([], 4), chunk([15], 5), complete(5)];

  it('measures TTFT at the first chunk with tokens, per-token ITL from each chunk\'s token_ids, and the counts from the messages', () => {
    const run = runGrpcTap(create, stream, OK);
    expect(measurements(run)).toMatchObject({ ttft: 100, lastToken: 130, events: 3, counted: 5, output: 5, source: 'usage', input: 7, terminal: true, error: false, mismatch: false, gaps: [[10, 3], [20, 1]], problems: [] });
    expect(run.timeline.reportedCachedInputTokens).toBe(4);
    expect(run.timeline.statusOutcome).toBeUndefined();
  });

  it('measures the same whichever byte the stream is cut at', () => {
    expectSameAtEveryCut(create, Buffer.concat(stream));
  });

  it('takes no TTFT from a chunk without tokens', () => {
    const run = runGrpcTap(create, [chunk([], 0), chunk([21, 22], 2), complete(2)], OK);
    expect(run.timeline.ttftMs).toBe(110);
    expect(run.timeline.countedTokens).toBe(2);
  });

  it('sums the final messages of n sequences for the output tokens', () => {
    const run = runGrpcTap(create, [chunk([1], 1), chunk([2], 1), complete(3), complete(4)], OK);
    expect(run.timeline.outputTokens).toBe(7);
  });

  it('ignores a response that is neither a chunk nor a final message', () => {
    const run = runGrpcTap(create, [grpcFrame(Buffer.alloc(0)), chunk([1], 1)], OK);
    expect(measurements(run)).toMatchObject({ events: 1, counted: 1, problems: [] });
  });

  it('keeps the output total within 10^7 tokens when final messages would sum beyond it', () => {
    const run = runGrpcTap(create, [complete(6_000_000), complete(6_000_000)], OK);
    expect(run.problems).toEqual(['implausible_value']);
    expect(run.timeline.outputTokens).toBe(6_000_000);
  });

  it('leaves a stream ended without grpc-status unterminated', () => {
    expect(runGrpcTap(create, stream, undefined).timeline.terminal).toBe(false);
    expect(runGrpcTap(create, stream, { 'content-type': 'application/grpc' }).timeline.terminal).toBe(false);
  });

  it('names the outcome from a non-OK grpc-status, the stream still terminated', () => {
    const run = runGrpcTap(create, stream.slice(0, 2), { 'grpc-status': '4', 'grpc-message': 'deadline' });
    expect(run.timeline.terminal).toBe(true);
    expect(run.timeline.statusOutcome).toBe('timeout');
  });

  describe('hostile or broken messages are counted, never thrown', () => {
    it('skips a chunk of 10^7 token_ids as an oversized message', () => {
      // GenerateResponse.chunk (length-delimited) holding token_ids packed: 10^7 one-byte varints.
      const chunkField = ENGINE_PROTOS.smg.lookupType(response).fields.chunk!.id;
      const ids = new protobuf.Writer().uint32((1 << 3) | 2).bytes(Buffer.alloc(10_000_000, 1)).finish();
      const message = new protobuf.Writer().uint32((chunkField << 3) | 2).bytes(ids).finish();
      const run = runGrpcTap(create, [grpcFrame(message), chunk([5], 1)], OK);
      expect(run.problems).toEqual(['oversized_event']);
      expect(run.timeline.countedTokens).toBe(1);
      expect(run.timeline.ttftMs).toBe(110);
    });

    it('counts a chunk of more tokens than one event can plausibly carry as one token, and says so', () => {
      const run = runGrpcTap(create, [chunk(Array.from({ length: 2000 }, (_, i) => i), 2000)], OK);
      expect(run.problems).toEqual(['implausible_value']);
      expect(run.timeline.countedTokens).toBe(1);
    });

    it('drops counts beyond 10^7 tokens', () => {
      const run = runGrpcTap(create, [grpcFrame(encode(response, { complete: { finish_reason: 'stop', prompt_tokens: 4_000_000_000, completion_tokens: 4_000_000_000, cached_tokens: 4_000_000_000 } }))], OK);
      expect(run.problems).toEqual(['implausible_value', 'implausible_value', 'implausible_value']);
      expect(run.timeline.reportedInputTokens).toBeNaN();
      expect(run.timeline.reportedOutputTokens).toBeNaN();
      expect(run.timeline.reportedCachedInputTokens).toBeNaN();
    });

    it('drops a cached count above the prompt it was served for (a cached share above 1 is no hit rate)', () => {
      const run = runGrpcTap(create, [grpcFrame(encode(response, { complete: { finish_reason: 'stop', prompt_tokens: 7, completion_tokens: 1, cached_tokens: 8 } }))], OK);
      expect(run.problems).toEqual(['implausible_value']);
      expect(run.timeline.reportedInputTokens).toBe(7);
      expect(run.timeline.reportedCachedInputTokens).toBeNaN();
    });

    it('counts a message that is not protobuf as malformed and reads the next one', () => {
      // Field 1 length-delimited claiming 2^32 bytes, then a field of the invalid wire type 7.
      const run = runGrpcTap(create, [grpcFrame(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f])), grpcFrame(Buffer.from([0x0f, 0x01])), chunk([1], 1)], OK);
      expect(run.problems).toEqual(['malformed_event', 'malformed_event']);
      expect(run.timeline.countedTokens).toBe(1);
    });

    it('counts a frame cut off by the end of the body as malformed', () => {
      const frame = chunk([1, 2], 2);
      const run = runGrpcTap(create, [chunk([1], 1), frame.subarray(0, frame.length - 1)], undefined);
      expect(run.problems).toEqual(['malformed_event']);
      expect(run.timeline.countedTokens).toBe(1);
    });

    it('counts a length prefix claiming 4 GiB as oversized and then cut off', () => {
      const run = runGrpcTap(create, [chunk([1], 1), Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3])], undefined);
      expect(run.problems).toEqual(['oversized_event', 'malformed_event']);
    });

    it('makes a grpc-status that is not a code an upstream error, counted as malformed', () => {
      for (const status of ['abc', '', '-1', '12345678901', ['0', '0'], ['13']]) {
        const run = runGrpcTap(create, stream, { 'grpc-status': status as string });
        expect(run.problems, String(status)).toEqual(['malformed_event']);
        expect(run.timeline.statusOutcome).toBe('upstream_error');
      }
    });

    it('measures compressed messages by their arrival only, counted once per response', () => {
      const compressed = [grpcFrame(Buffer.from('not decompressed'), true), grpcFrame(Buffer.from('not decompressed either'), true)];
      const run = runGrpcTap(create, compressed, OK, 10, 100, 'gzip');
      expect(run.problems).toEqual(['compressed_message']);
      expect(measurements(run)).toMatchObject({ ttft: 100, events: 2, counted: 2, gaps: [[10, 1]], terminal: true });
      expect(run.timeline.errorEvent).toBe(false);
    });

    it('stops reading at a compressed flag the response declared no grpc-encoding for, and makes the call an upstream error although it ended OK', () => {
      // Reproduction: timed as compressed content (TTFT, 3 output tokens, completed) while grpc-go
      // fails such a call and @grpc/grpc-js delivered none of its messages.
      for (const encoding of [undefined, 'identity', ' Identity ', '']) {
        const run = runGrpcTap(create, [chunk([1], 1), grpcFrame(Buffer.from('flagged, not compressed'), true), chunk([2, 3], 3), complete(3)], OK, 10, 100, encoding);
        expect(run.problems, String(encoding)).toEqual(['malformed_event']);
        expect(run.timeline.countedTokens).toBe(1);
        expect(run.timeline.errorEvent).toBe(true);
        expect(run.timeline.statusOutcome).toBeUndefined();
      }
    });

    it('stops reading at a prefix whose flag is neither 0 nor 1: counted once, no token taken from what follows, an upstream error', () => {
      // Reproduction: flag 2 was timed as a compressed message and the bytes after it read on as messages.
      const odd = chunk([9, 9, 9], 3);
      odd[0] = 2;
      const run = runGrpcTap(create, [chunk([1], 1), odd, chunk([2, 3], 3), Buffer.from([0, 0, 0])], OK, 10, 100, 'gzip');
      expect(run.problems).toEqual(['malformed_event']);
      expect(measurements(run)).toMatchObject({ events: 1, counted: 1 });
      expect(run.timeline.errorEvent).toBe(true);
    });

    it('makes a message cut off before a status that says the call ended an upstream error; cut off with no status, the call stays unterminated', () => {
      // Reproduction: a cut message followed by grpc-status 0 was `completed`.
      const frame = chunk([2, 3], 3);
      const cut = [chunk([1], 1), frame.subarray(0, frame.length - 1)];
      const withStatus = runGrpcTap(create, cut, OK);
      expect(withStatus.problems).toEqual(['malformed_event']);
      expect(withStatus.timeline.errorEvent).toBe(true);
      const withoutStatus = runGrpcTap(create, cut, undefined);
      expect(withoutStatus.timeline.errorEvent).toBe(false);
      expect(withoutStatus.timeline.terminal).toBe(false);
    });
  });
});
