import { describe, expect, it } from 'vitest';
import { grpcRequestModel, grpcRequestNamesModel } from '../../../../src/taps/grpc/request-model.js';
import { createTritonGrpcTap } from '../../../../src/taps/triton-grpc.js';
import { encode, grpcFrame, runGrpcTap } from '../../../helpers/grpc-frames.js';
import { expectSameAtEveryCut, measurements } from '../replay.js';

const OK = { 'grpc-status': '0' };
const RESPONSE = 'inference.ModelStreamInferResponse';

/** A BYTES tensor element as Triton writes raw contents: a 4-byte little-endian length, then the bytes. */
function rawBytes(text: string): Buffer {
  const body = Buffer.from(text);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(body.length);
  return Buffer.concat([length, body]);
}

const textResponse = (text: string) =>
  grpcFrame(encode(RESPONSE, { infer_response: { model_name: 'llama', id: 'r1', outputs: [{ name: 'text_output', datatype: 'BYTES', shape: [1] }], raw_output_contents: [rawBytes(text)] } }));
const idsResponse = (ids: number[]) =>
  grpcFrame(
    encode(RESPONSE, {
      infer_response: { model_name: 'tensorrt_llm', outputs: [{ name: 'output_ids', datatype: 'INT32', shape: [1, 1, ids.length], contents: { int_contents: ids } }] },
    }),
  );
const finalResponse = () => grpcFrame(encode(RESPONSE, { infer_response: { model_name: 'llama', parameters: { triton_final_response: { bool_param: true } } } }));

describe('Triton ModelStreamInfer tap', () => {
  it('counts the elements of output_ids as the tokens of a response: exact per-token ITL', () => {
    const run = runGrpcTap(createTritonGrpcTap, [idsResponse([5]), idsResponse([6, 7, 8]), idsResponse([9]), finalResponse()], OK);
    expect(measurements(run)).toMatchObject({ ttft: 100, events: 3, counted: 5, source: 'counted', gaps: [[10, 3], [10, 1]], terminal: true, problems: [] });
  });

  it('counts one token per response with non-empty text_output, raw or in bytes_contents, and none for an empty one', () => {
    const inContents = grpcFrame(encode(RESPONSE, { infer_response: { outputs: [{ name: 'text_output', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.from(' world')] } }] } }));
    const run = runGrpcTap(createTritonGrpcTap, [textResponse(''), textResponse('Hello'), inContents, finalResponse()], OK);
    expect(measurements(run)).toMatchObject({ ttft: 110, events: 2, counted: 2, gaps: [[10, 1]], terminal: true, problems: [] });
  });

  it('measures the same whichever byte the stream is cut at', () => {
    expectSameAtEveryCut(createTritonGrpcTap, Buffer.concat([textResponse('a'), idsResponse([1, 2]), textResponse('b'), finalResponse()]));
  });

  it('makes a response with error_message an upstream error although the call ends OK', () => {
    const run = runGrpcTap(createTritonGrpcTap, [textResponse('a'), grpcFrame(encode(RESPONSE, { error_message: 'model failed' }))], OK);
    expect(run.timeline.errorEvent).toBe(true);
    expect(run.timeline.statusOutcome).toBeUndefined();
  });

  it('bounds the token count a tensor shape claims', () => {
    const huge = grpcFrame(encode(RESPONSE, { infer_response: { outputs: [{ name: 'output_ids', datatype: 'INT32', shape: [1, 1, 4_000_000_000] }] } }));
    const negative = grpcFrame(encode(RESPONSE, { infer_response: { outputs: [{ name: 'output_ids', datatype: 'INT32', shape: [-1] }] } }));
    // 2^53 + 1, beyond what a double holds exactly: decoded as a Long.
    const beyond2to53 = grpcFrame(encode(RESPONSE, { infer_response: { outputs: [{ name: 'output_ids', datatype: 'INT32', shape: [{ low: 1, high: 0x20_0000, unsigned: false }] }] } }));
    const run = runGrpcTap(createTritonGrpcTap, [huge, negative, beyond2to53], OK);
    expect(run.problems).toEqual(['implausible_value', 'implausible_value', 'implausible_value']);
    expect(run.timeline.countedTokens).toBe(3);
  });
});

describe('a request\'s counted tokens', () => {
  // Hostile review: messages of 25 bytes each claiming a shape of [1024] counted 20,480,000 tokens for 500 KB.
  it('stop at 10^7 however many messages claim 1,024 tokens each; each message past the bound counts one', () => {
    const claim = grpcFrame(encode(RESPONSE, { infer_response: { outputs: [{ name: 'output_ids', datatype: 'INT32', shape: [1, 1, 1024] }] } }));
    const run = runGrpcTap(createTritonGrpcTap, Array.from({ length: 10_000 }, () => claim), OK);
    expect(run.problems).toEqual([]);
    expect(run.timeline.countedTokens).toBe(10_000_000);
    expect(run.timeline.countedPastBound).toBe(true);
    expect(run.timeline.contentEvents).toBe(10_000);
    const gaps = run.gaps.map(([, tokens]) => tokens);
    // 9,765 messages of 1,024 fill 9,999,360; the next takes the 640 left; the 234 after it one each.
    expect([gaps.length, gaps.filter((t) => t === 1024).length, gaps.filter((t) => t === 640).length, gaps.filter((t) => t === 1).length]).toEqual([9_999, 9_764, 1, 234]);
  });
});

describe('the model of a gRPC request', () => {
  const STREAM_INFER = '/inference.GRPCInferenceService/ModelStreamInfer';
  const request = grpcFrame(
    encode('inference.ModelInferRequest', {
      model_name: 'llama-3-8b',
      id: 'r1',
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
      raw_input_contents: [rawBytes('a prompt that is not read')],
    }),
  );

  it('is Triton\'s model_name from the first request message', () => {
    expect(grpcRequestNamesModel(STREAM_INFER)).toBe(true);
    expect(grpcRequestModel(STREAM_INFER, request)).toBe('llama-3-8b');
    expect(grpcRequestModel('/inference.GRPCInferenceService/ModelInfer', Buffer.concat([request, request.subarray(0, 3)]))).toBe('llama-3-8b');
  });

  it('is unknown for the engines whose Generate request names no model', () => {
    for (const path of ['/vllm.grpc.engine.VllmEngine/Generate', '/sglang.grpc.scheduler.SglangScheduler/Generate', '/trtllm.TrtllmService/Generate']) {
      expect(grpcRequestNamesModel(path)).toBe(false);
      expect(grpcRequestModel(path, request)).toBeUndefined();
    }
  });

  it('is unknown, never thrown, when the first message is incomplete, compressed, over the cap or not protobuf', () => {
    expect(grpcRequestModel(STREAM_INFER, request.subarray(0, request.length - 1))).toBeUndefined();
    expect(grpcRequestModel(STREAM_INFER, request.subarray(0, 4))).toBeUndefined();
    expect(grpcRequestModel(STREAM_INFER, Buffer.concat([Buffer.from([1]), request.subarray(1)]))).toBeUndefined();
    expect(grpcRequestModel(STREAM_INFER, Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 0x0a]))).toBeUndefined();
    expect(grpcRequestModel(STREAM_INFER, grpcFrame(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f])))).toBeUndefined();
    expect(grpcRequestModel(STREAM_INFER, grpcFrame(Buffer.alloc(0)))).toBeUndefined();
  });
});
