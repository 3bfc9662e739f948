import { describe, expect, it } from 'vitest';
import { isCoded } from '../../../src/proxy/content-coding.js';

describe('isCoded (a Content-Encoding no tap can read through)', () => {
  it('is true for any coding but identity, in any case, alone or in a list', () => {
    for (const value of ['gzip', 'GZIP', 'br', 'deflate', 'zstd', 'x-custom', 'identity, gzip', ' , gzip']) expect(isCoded(value), value).toBe(true);
  });

  it('is false without the header, and for identity or empty list elements alone', () => {
    for (const value of [undefined, '', 'identity', 'Identity', ' identity , ', ',']) expect(isCoded(value), String(value)).toBe(false);
  });
});
