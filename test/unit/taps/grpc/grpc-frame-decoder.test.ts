import { describe, expect, it } from 'vitest';
import { GrpcFrameDecoder } from '../../../../src/taps/grpc/grpc-frame-decoder.js';
import { grpcFrame } from '../../../helpers/grpc-frames.js';

/** Everything a decoder reported, in order: delivered messages as hex, the rest by name. Compression is declared unless `compressionDeclared` says not. */
function decode(pieces: readonly Buffer[], maxMessageBytes?: number, compressionDeclared = true): string[] {
  const seen: string[] = [];
  const decoder = new GrpcFrameDecoder(
    {
      onMessage: (message) => seen.push(`message ${message.toString('hex')}`),
      onCompressed: () => seen.push('compressed'),
      onOversized: () => seen.push('oversized'),
      onTruncated: () => seen.push('truncated'),
      onMalformed: () => seen.push('malformed'),
    },
    { maxMessageBytes, compressionDeclared },
  );
  for (const piece of pieces) decoder.write(piece);
  decoder.end();
  return seen;
}

const bytes = (length: number, seed: number) => Buffer.from(Array.from({ length }, (_, i) => (i * 31 + seed) & 0xff));

describe('gRPC message framing', () => {
  // Real-shaped: a small chunk, an empty message (a default protobuf), a message of 300 bytes, a compressed one, another small one.
  const messages = [bytes(12, 1), Buffer.alloc(0), bytes(300, 2)];
  const stream = Buffer.concat([grpcFrame(messages[0]!), grpcFrame(messages[1]!), grpcFrame(messages[2]!), grpcFrame(bytes(40, 3), true), grpcFrame(bytes(7, 4))]);
  const expected = ['message ' + messages[0]!.toString('hex'), 'message ', 'message ' + messages[2]!.toString('hex'), 'compressed', 'message ' + bytes(7, 4).toString('hex')];

  it('delivers every message of a stream arriving whole', () => {
    expect(decode([stream])).toEqual(expected);
  });

  it('delivers the same messages whichever byte the stream is cut at', () => {
    for (let cut = 1; cut < stream.length; cut++) {
      expect(decode([stream.subarray(0, cut), stream.subarray(cut)]), `cut at byte ${cut}`).toEqual(expected);
    }
  });

  it('delivers the same messages when the stream is cut at two bytes', () => {
    for (let first = 1; first < stream.length; first += 7) {
      for (let second = first + 1; second < stream.length; second++) {
        const pieces = [stream.subarray(0, first), stream.subarray(first, second), stream.subarray(second)];
        expect(decode(pieces), `cuts at ${first} and ${second}`).toEqual(expected);
      }
    }
  });

  it('delivers the same messages arriving one byte at a time', () => {
    expect(decode(Array.from(stream, (byte) => Buffer.from([byte])))).toEqual(expected);
  });

  it('skips a message over the cap by its length, reports it once, and reads the next one', () => {
    const stream = Buffer.concat([grpcFrame(bytes(17, 5)), grpcFrame(bytes(16, 6))]);
    for (let cut = 1; cut < stream.length; cut++) {
      expect(decode([stream.subarray(0, cut), stream.subarray(cut)], 16), `cut at byte ${cut}`).toEqual(['oversized', 'message ' + bytes(16, 6).toString('hex')]);
    }
  });

  it('holds nothing for a length claiming 4 GiB, and reports it oversized and then cut off', () => {
    const claim = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
    const before = process.memoryUsage().arrayBuffers;
    expect(decode([claim, bytes(64 * 1024, 7), bytes(64 * 1024, 8)])).toEqual(['oversized', 'truncated']);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 * 1024 * 1024);
  });

  it('reports a message cut off by the end of the body, in its prefix or in its bytes', () => {
    const frame = grpcFrame(bytes(20, 9));
    expect(decode([frame.subarray(0, 3)])).toEqual(['truncated']);
    expect(decode([frame.subarray(0, 10)])).toEqual(['truncated']);
    expect(decode([Buffer.concat([frame, frame.subarray(0, 1)])])).toEqual(['message ' + bytes(20, 9).toString('hex'), 'truncated']);
  });

  it('reports nothing for an empty body, and no cut for skipped empty messages at its end', () => {
    expect(decode([])).toEqual([]);
    expect(decode([Buffer.concat([grpcFrame(Buffer.alloc(0), true)])])).toEqual(['compressed']);
    expect(decode([grpcFrame(bytes(3, 1))], 2)).toEqual(['oversized']);
  });

  it('stops at a prefix whose flag is neither 0 nor 1, reports it once and reads nothing after it, at any cut', () => {
    // Reproduction: flag 0x80 was skipped as a compressed message and the decoder went on taking
    // the bytes after it, framed by a length from a prefix that is not gRPC's, for messages.
    for (const flag of [2, 0x80, 0xff]) {
      const odd = grpcFrame(bytes(3, 1));
      odd[0] = flag;
      const stream = Buffer.concat([grpcFrame(bytes(4, 3)), odd, grpcFrame(bytes(2, 2)), Buffer.from([0, 0, 0])]);
      for (let cut = 1; cut < stream.length; cut++) {
        expect(decode([stream.subarray(0, cut), stream.subarray(cut)]), `flag ${flag}, cut at byte ${cut}`).toEqual(['message ' + bytes(4, 3).toString('hex'), 'malformed']);
      }
    }
  });

  it('stops at a compressed flag on a response that declared no grpc-encoding, and reads nothing after it', () => {
    // PROTOCOL-HTTP2.md: "If the Message-Encoding header is omitted then the Compressed-Flag must be 0".
    const stream = Buffer.concat([grpcFrame(bytes(4, 3)), grpcFrame(bytes(40, 3), true), grpcFrame(bytes(7, 4))]);
    expect(decode([stream], undefined, false)).toEqual(['message ' + bytes(4, 3).toString('hex'), 'malformed']);
    expect(decode([stream], undefined, true)).toEqual(['message ' + bytes(4, 3).toString('hex'), 'compressed', 'message ' + bytes(7, 4).toString('hex')]);
  });
});

// Stryker on grpc-frame-decoder.ts: 93.5 % (87 of 93) before the 20,000-byte step below killed Math.min -> Math.max;
// of the survivors in gather(), `needed >= gathered.length`
// is equivalent (a buffer exactly full is grown one step early, never past the message's length).
describe('gRPC message framing against an upstream that announces more than it sends', () => {
  it('holds what arrived, not the 1 MiB each of 200 streams announces in a prefix followed by one byte', () => {
    const handlers = { onMessage: () => undefined, onCompressed: () => undefined, onOversized: () => undefined, onTruncated: () => undefined, onMalformed: () => undefined };
    const prefix = Buffer.from([0, 0, 0x10, 0, 0, 0x41]); // uncompressed, 1,048,576 bytes announced, 1 byte sent
    const before = process.memoryUsage().arrayBuffers;
    const decoders = Array.from({ length: 200 }, () => new GrpcFrameDecoder(handlers, { compressionDeclared: false }));
    for (const decoder of decoders) decoder.write(prefix);
    // At most one 16 KiB DATA frame's buffer each (3.2 MiB); allocated up front it was 200 MiB.
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(8 * 1024 * 1024);
    // 20,000 bytes more each: past the first buffer, which doubles to 32 KiB, not to the 1 MiB announced.
    const more = Buffer.alloc(20_000, 0x42);
    for (const decoder of decoders) decoder.write(more);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(12 * 1024 * 1024);
    for (const decoder of decoders) decoder.end();
  });

  it('delivers a 100 kB message sent a byte at a time, byte for byte', () => {
    const message = bytes(100_000, 9);
    const frame = grpcFrame(message);
    const pieces = Array.from({ length: frame.length }, (_, i) => frame.subarray(i, i + 1));
    expect(decode(pieces)).toEqual([`message ${message.toString('hex')}`]);
  });
});
