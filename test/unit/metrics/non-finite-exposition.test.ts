import { afterEach, describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { decodeDelimited } from '../../../src/metrics/protobuf-exposition.js';
import { Recorder, type RequestSummary } from '../../../src/metrics/recorder.js';
import { Telemetry } from '../../../src/metrics/telemetry.js';
import { parsePrometheusText, prometheusFloat } from '../../helpers/prometheus-text.js';

/**
 * The text and protobuf expositions of one scrape agree on non-finite values. Upstream numbers
 * are bounded before they reach a metric (src/taps/upstream-numbers.ts), so this is the second
 * line: should a sum ever overflow, both formats say the same. The text format writes `+Inf`,
 * `-Inf` and `NaN` (Prometheus reads them with Go's strconv.ParseFloat); a reader that takes
 * `+Inf` with JavaScript's Number() gets NaN, which is how issue 23 saw "NaN in text, +Inf in
 * protobuf": the text said `+Inf`.
 */

const telemetries: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(telemetries.splice(0).map((t) => t.shutdown()));
});

const request = (engineTtftMs: number, inputTokens: number): RequestSummary => ({
  outcome: 'completed',
  statusClass: '2xx',
  ttfbMs: 10,
  ttftMs: 20,
  tpotMs: Number.NaN,
  e2eMs: 100,
  inputTokens,
  outputTokens: 1,
  tokenSource: 'usage',
  tokenCountMismatch: false,
  engineTtftMs,
});

type ProtoFamily = { name: string; metric: Array<{ label: Array<{ name: string; value: string }>; counter?: { value?: number }; histogram?: { sample_sum?: number } }> };

describe('text and protobuf expositions on non-finite values', () => {
  it('print +Inf, -Inf and NaN alike: a +Inf histogram sum, a NaN one (+Inf then -Inf) and a +Inf counter', async () => {
    const telemetry = new Telemetry();
    telemetries.push(telemetry);
    const recorder = new Recorder(telemetry.meter, loadSettings({ flags: {}, env: {} }).buckets);
    const plus = recorder.requestAttributes('plus', 'm');
    const nan = recorder.requestAttributes('nan', 'm');
    for (const [attributes, summary] of [
      [plus, request(Infinity, Infinity)],
      [nan, request(Infinity, 1)],
      [nan, request(-Infinity, 1)],
    ] as const) {
      recorder.started(attributes);
      recorder.finished(attributes, summary);
    }
    const textBody = await telemetry.scrape();
    const text = parsePrometheusText(textBody);
    const proto = decodeDelimited(await telemetry.scrapeProtobuf()) as unknown as ProtoFamily[];
    const textValue = (name: string, workload: string, field: 'sum' | 'value') => {
      const sample = text.get(name)?.metrics.find((m) => m.labels['workload'] === workload && (field === 'sum' || m.labels['gen_ai_token_type'] === 'input'));
      return prometheusFloat((field === 'sum' ? sample?.sum : sample?.value) as string);
    };
    const protoValue = (name: string, workload: string, field: 'sum' | 'value') => {
      const metric = proto.find((f) => f.name === name)?.metric.find((m) => m.label.some((l) => l.name === 'workload' && l.value === workload) && (field === 'sum' || m.label.some((l) => l.value === 'input')));
      return field === 'sum' ? metric?.histogram?.sample_sum : metric?.counter?.value;
    };
    const engine = 'tokentap_engine_time_to_first_token_seconds';
    expect(textBody).toMatch(/^tokentap_engine_time_to_first_token_seconds_sum\{workload="plus",[^}]*\} \+Inf$/m);
    expect(textBody).toMatch(/^tokentap_engine_time_to_first_token_seconds_sum\{workload="nan",[^}]*\} NaN$/m);
    expect(textBody).toMatch(/^tokentap_tokens_total\{workload="plus",[^}]*gen_ai_token_type="input"[^}]*\} \+Inf$/m);
    expect([textValue(engine, 'plus', 'sum'), protoValue(engine, 'plus', 'sum')]).toEqual([Infinity, Infinity]);
    expect([textValue(engine, 'nan', 'sum'), protoValue(engine, 'nan', 'sum')]).toEqual([Number.NaN, Number.NaN]);
    expect([textValue('tokentap_tokens_total', 'plus', 'value'), protoValue('tokentap_tokens_total', 'plus', 'value')]).toEqual([Infinity, Infinity]);
  });
});
