import { describe, expect, it } from 'vitest';
import { ExpositionParseError, parseExposition } from '../../../src/dcgm/exposition-parser.js';
import { dcgmFixture, dcgmFixtureNames } from '../../helpers/dcgm-exporter.js';

describe('Prometheus text parser for the DCGM exporter', () => {
  it('reads every sample of every fixture with its labels and value', () => {
    for (const name of dcgmFixtureNames()) {
      const text = dcgmFixture(name);
      const sampleLines = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
      const samples = parseExposition(text);
      expect(samples, name).toHaveLength(sampleLines.length);
      for (const s of samples) expect(s.labels.UUID, name).toMatch(/^GPU-/);
    }
    const mig = parseExposition(dcgmFixture('newer-exporter-mig.prom'));
    expect(mig.find((s) => s.name === 'DCGM_FI_DEV_MEMORY_TEMP')?.value).toBe(9223372036854775794);
  });

  it('unescapes label values, accepts CRLF, timestamps, a trailing comma and NaN/Inf', () => {
    const samples = parseExposition('a{x="q\\"uote\\\\back\\nline",y="2",} 1.5e3 1700000000000\r\nb NaN\nc{} +Inf\n');
    expect(samples).toEqual([
      { name: 'a', labels: { x: 'q"uote\\back\nline', y: '2' }, value: 1500 },
      { name: 'b', labels: {}, value: Number.NaN },
      { name: 'c', labels: {}, value: Infinity },
    ]);
  });

  it.each([
    ['a missing value', 'ok 1\nDCGM_FI_DEV_FB_USED{gpu="0"}\n', 2],
    ['an unterminated label value', '# HELP x\nx{gpu="0} 1\n', 2],
    ['a non-numeric value', 'x 1\ny 2\nz twelve\n', 3],
    ['an HTML error page', '<html><body>502 Bad Gateway</body></html>\n', 1],
  ])('rejects %s with the line number', (_what, text, line) => {
    expect(() => parseExposition(text)).toThrow(ExpositionParseError);
    expect(() => parseExposition(text)).toThrow(new RegExp(`^line ${line}: `));
  });
});

describe('skipping series the reader does not use', () => {
  it('returns only kept series, yet still rejects a line that is not a sample', () => {
    const text = dcgmFixture('pod-mapped.prom');
    const kept = parseExposition(text, (name) => name === 'DCGM_FI_DEV_GPU_UTIL');
    expect(kept.map((s) => s.name)).toEqual(['DCGM_FI_DEV_GPU_UTIL']);
    const htmlLine = text.split('\n').length;
    expect(() => parseExposition(`${text}<html>\n`, () => false)).toThrow(new RegExp(`^line ${htmlLine}: not a sample: <html>`));
  });
});
