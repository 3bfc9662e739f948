import { describe, expect, it } from 'vitest';
import { BytesPerToken } from '../../../src/profile/bytes-per-token.js';
import { ProfileStore } from '../../../src/profile/profile-store.js';

describe('the bytes-per-token estimate that places fingerprint blocks', () => {
  it('keeps its block boundaries when a client pads prompts with 1 MiB of fields the server never tokenizes (10 tokens reported)', () => {
    const store = new ProfileStore({ maxRequestsPerWorkload: 2000, blockTokens: 512, workloads: ['chat'] }, { nowMs: () => 0 });
    const legit = (i: number) => ({ startMs: i, durationMs: 1, inputTokens: 1000, outputTokens: 10, cachedInputTokens: Number.NaN, outcome: 'completed' as const, blocks: { hashes: [], promptBytes: 4096 } });
    for (let i = 0; i < 1000; i++) store.record('chat', legit(i));
    const prompt = { prompt: 'x'.repeat(4096) };
    const before = store.fingerprint('chat', prompt)?.hashes;
    for (let i = 0; i < 10; i++) store.record('chat', { ...legit(i), inputTokens: 10, blocks: { hashes: [], promptBytes: 1 << 20 } });
    // 4 bytes a token: blocks of 2,048 bytes, two in "prompt\n" + 4,096 characters + "\n".
    expect(before).toHaveLength(2);
    expect(store.fingerprint('chat', prompt)?.hashes).toEqual(before);
  });

  it.each([
    ['an image URL counted as thousands of tokens', 60, 2000],
    ['base64 image data counted as a few hundred tokens', 100_000, 300],
  ])('is not moved by %s', (_name, promptBytes, inputTokens) => {
    const estimate = new BytesPerToken();
    for (let i = 0; i < 100; i++) estimate.observe(promptBytes, inputTokens);
    expect(estimate.value).toBe(4);
  });

  it('follows a text whose tokenizer gives 1.5 bytes a token (CJK) and one that gives 6 (code)', () => {
    const cjk = new BytesPerToken();
    for (let i = 0; i < 100; i++) cjk.observe(1500, 1000);
    expect(cjk.value).toBe(1.5);
    const code = new BytesPerToken();
    for (let i = 0; i < 100; i++) code.observe(6000, 1000);
    expect(code.value).toBe(6);
  });
});
