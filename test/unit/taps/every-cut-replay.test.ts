import { describe, it } from 'vitest';
import { createAnthropicSseTap } from '../../../src/taps/anthropic-sse.js';
import { createLlamaCppSseTap } from '../../../src/taps/llamacpp-sse.js';
import { createOllamaNdjsonTap } from '../../../src/taps/ollama-ndjson.js';
import { createOpenAIResponsesSseTap } from '../../../src/taps/openai-responses-sse.js';
import { createOpenAISseTap } from '../../../src/taps/openai-sse.js';
import { createTgiSseTap } from '../../../src/taps/tgi-sse.js';
import { createTritonSseTap } from '../../../src/taps/triton-sse.js';
import type { TapFactory } from '../../../src/taps/tap.js';
import { llamacppStream, llamacppStreamNames } from '../../helpers/fixtures.js';
import { EVERY_CUT_TIMEOUT_MS, expectSameAtEveryCut, streamFixture, streamFixtureNames } from './replay.js';

/**
 * Every real capture, cut in two at each of its bytes, measures exactly as unsplit: one full replay
 * per byte, 2-35 s per capture on the shared 2-core machine. They live apart from each tap's own
 * tests so that `npm run mutate` on a tap or the token timeline, which runs those tests for every
 * mutant, does not replay them (test/mutation/module-tests.mjs); each tap's tests cut its captures
 * at random points instead.
 */

const PROTOCOLS: Array<[dir: string, tap: TapFactory]> = [
  ['anthropic', createAnthropicSseTap],
  ['openai-responses', createOpenAIResponsesSseTap],
  ['tgi', createTgiSseTap],
  ['ollama', createOllamaNdjsonTap],
  ['triton', createTritonSseTap],
];

describe.each(PROTOCOLS)('%s fixtures', (dir, tap) => {
  it.each(streamFixtureNames(dir))(
    '%s measures the same split at every byte boundary as unsplit',
    (name) => expectSameAtEveryCut(tap, streamFixture(dir, name)),
    EVERY_CUT_TIMEOUT_MS,
  );
});

describe('llama.cpp captures', () => {
  it.each(llamacppStreamNames().filter((n) => n !== 'completion-native.sse'))(
    'OpenAI-compatible %s measures the same split at every byte boundary as unsplit',
    (name) => expectSameAtEveryCut(createOpenAISseTap, llamacppStream(name)),
    EVERY_CUT_TIMEOUT_MS,
  );

  it(
    'native /completion measures the same split at every byte boundary as unsplit',
    () => expectSameAtEveryCut(createLlamaCppSseTap, llamacppStream('completion-native.sse')),
    EVERY_CUT_TIMEOUT_MS,
  );
});
