import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { problemsOf } from '../../helpers/problems.js';

const withFile = (yaml: string) => loadSettings({ flags: { config: 'c.yaml' }, env: {}, readFile: () => yaml });

describe('capacity: settings', () => {
  it('defaults to 100 samples per band, a week of bands, a day of peak, a ticket under 20 % headroom and no planned peak', () => {
    expect(withFile('{}\n').capacity).toEqual({ minSamplesPerBand: 100, windowMs: 7 * 86_400_000, peakWindowMs: 86_400_000, plannedPeakRps: undefined, headroomTicketRatio: 0.2 });
  });

  it('loads the example of docs/capacity-and-cost.md as the page shows it, every key in it', () => {
    const page = readFileSync('docs/capacity-and-cost.md', 'utf8');
    const example = /```yaml\n(capacity:\n[\s\S]*?)```/.exec(page)?.[1];
    expect(example).toBeDefined();
    expect(withFile(example as string).capacity).toEqual({ minSamplesPerBand: 200, windowMs: 14 * 86_400_000, peakWindowMs: 86_400_000, plannedPeakRps: 250, headroomTicketRatio: 0.25 });
  });

  it('names the file, line and key of each bad capacity setting', () => {
    expect(problemsOf(() => withFile('capacity:\n  min_samples_per_band: 0.5\n  window: 7d\n  planned_peak_rps: -3\n  headroom_ticket_ratio: 1\n  peak_windw: 1h\n'))).toEqual([
      'c.yaml:2: capacity.min_samples_per_band: expected a whole number of requests, e.g. 100',
      'c.yaml:3: capacity.window: expected a duration in ms, s, m or h: days are written in hours, "7d" is "168h"',
      'c.yaml:4: capacity.planned_peak_rps: expected requests per second above 0, e.g. 250',
      'c.yaml:5: capacity.headroom_ticket_ratio: expected a ratio above 0 and below 1, e.g. 0.2',
      'c.yaml:6: capacity.peak_windw: unknown setting; did you mean "peak_window"?',
    ]);
  });
});
