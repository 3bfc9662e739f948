import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../../src/metrics/recorder.js';
import { e2eResult, interTokenIsBad, isClientErrorStatus, ttftResult, type FinishedRequestFacts } from '../../../src/slo/slo-events.js';

const facts = (outcome: Outcome, status: number, ttftMs: number, e2eMs: number, nonStreamedAnswer = false): FinishedRequestFacts => ({
  outcome,
  status,
  ttftMs,
  e2eMs,
  nonStreamedAnswer,
});
const NO_TOKEN = Number.NaN;
/** The client left before it had sent its whole request: the server never had it. */
const unsent = (f: FinishedRequestFacts): FinishedRequestFacts => ({ ...f, requestUnsent: true });

describe('TTFT SLO events (threshold 0.2 s)', () => {
  const cases: ReadonlyArray<readonly [string, FinishedRequestFacts, 'good' | 'bad' | undefined]> = [
    ['first token within the threshold', facts('completed', 200, 150, 900), 'good'],
    ['first token exactly at the threshold', facts('completed', 200, 200, 900), 'good'],
    ['first token after the threshold', facts('completed', 200, 200.001, 900), 'bad'],
    ['first token in time, then the client left', facts('client_cancelled', 200, 100, 300), 'good'],
    ['first token late, then the upstream broke', facts('upstream_error', 200, 500, 600), 'bad'],
    ['no token, client left after longer than the threshold', facts('client_cancelled', 200, NO_TOKEN, 250), 'bad'],
    ['no token, client left before any header after longer than the threshold', facts('client_cancelled', 0, NO_TOKEN, 250), 'bad'],
    ['no token, client left sooner than the threshold', facts('client_cancelled', 200, NO_TOKEN, 150), undefined],
    ['no token, client left exactly at the threshold', facts('client_cancelled', 0, NO_TOKEN, 200), undefined],
    ['no token, client left mid-body after longer than the threshold (the server never had its request)', unsent(facts('client_cancelled', 0, NO_TOKEN, 5000)), undefined],
    ['no token, the upstream failed before the client had sent all of its body', unsent(facts('upstream_error', 502, NO_TOKEN, 5000)), 'bad'],
    ['no token, upstream timed out', facts('timeout', 504, NO_TOKEN, 300_000), 'bad'],
    ['no token, stream truncated late', facts('truncated', 200, NO_TOKEN, 400), 'bad'],
    ['no token, 503 after longer than the threshold', facts('upstream_error', 503, NO_TOKEN, 400), 'bad'],
    ['no token, 503 sooner than the threshold (a fast failure is still no answer)', facts('upstream_error', 503, NO_TOKEN, 20), 'bad'],
    ['no token, stream truncated early', facts('truncated', 200, NO_TOKEN, 30), 'bad'],
    ['no token, connection refused at once', facts('upstream_error', 0, NO_TOKEN, 2), 'bad'],
    ['no token, 429 after longer than the threshold', facts('upstream_error', 429, NO_TOKEN, 400), 'bad'],
    ['client error (400), however slow', facts('client_error', 400, NO_TOKEN, 5000), undefined],
    ['a request tokentap could not parse, refused before any response head', facts('client_error', 0, NO_TOKEN, 5000), undefined],
    ['a client error after a 2xx head, however slow', facts('client_error', 200, NO_TOKEN, 5000), undefined],
    ['a client error after a 2xx head and a late first token', facts('client_error', 200, 900, 5000), undefined],
    ['408 from the server, after longer than the threshold', facts('upstream_error', 408, NO_TOKEN, 400), 'bad'],
    ['a stream that completed without any token', facts('completed', 200, NO_TOKEN, 900), undefined],
    ['a non-streamed answer', facts('completed', 200, NO_TOKEN, 900, true), undefined],
  ];
  it.each(cases)('%s', (_what, f, expected) => expect(ttftResult(0.2, f)).toBe(expected));
});

describe('TTFT SLO events with ttft_on: first_answer (threshold 0.2 s): reasoning arrived, no answer token', () => {
  const unanswered = (outcome: Outcome, e2eMs: number): FinishedRequestFacts => ({ ...facts(outcome, 200, NO_TOKEN, e2eMs), unanswered: true });
  const cases: ReadonlyArray<readonly [string, FinishedRequestFacts, 'good' | 'bad' | undefined]> = [
    ['completed with reasoning only, fast (the user got no answer)', unanswered('completed', 50), 'bad'],
    ['the client left while the model reasoned, sooner than the threshold (not yet late)', unanswered('client_cancelled', 150), undefined],
    ['the client left while the model reasoned, after the threshold', unanswered('client_cancelled', 250), 'bad'],
    ['the stream broke while the model reasoned', unanswered('truncated', 50), 'bad'],
  ];
  it.each(cases)('%s', (_what, f, expected) => expect(ttftResult(0.2, f)).toBe(expected));
});

describe('e2e SLO events (threshold 3 s)', () => {
  const cases: ReadonlyArray<readonly [string, FinishedRequestFacts, 'good' | 'bad' | undefined]> = [
    ['completed within', facts('completed', 200, 100, 2999), 'good'],
    ['completed exactly at', facts('completed', 200, 100, 3000), 'good'],
    ['completed after', facts('completed', 200, 100, 3001), 'bad'],
    ['a non-streamed answer within', facts('completed', 200, NO_TOKEN, 800, true), 'good'],
    ['upstream error, fast', facts('upstream_error', 500, NO_TOKEN, 5), 'bad'],
    ['upstream broke mid-stream', facts('upstream_error', 200, 100, 900), 'bad'],
    ['truncated', facts('truncated', 200, 100, 900), 'bad'],
    ['timeout', facts('timeout', 504, NO_TOKEN, 300_000), 'bad'],
    ['cut at the sidecar\'s shutdown', facts('shutdown', 200, 100, 900), 'bad'],
    ['429', facts('upstream_error', 429, NO_TOKEN, 10), 'bad'],
    ['client error (404)', facts('client_error', 404, NO_TOKEN, 10), undefined],
    ['a client error after a 2xx head, however slow', facts('client_error', 200, 100, 9000), undefined],
    ['a request tokentap could not parse, refused before any response head', facts('client_error', 0, NO_TOKEN, 9000), undefined],
    ['499', facts('upstream_error', 499, NO_TOKEN, 10), 'bad'],
    ['client left before the threshold', facts('client_cancelled', 200, 100, 1000), undefined],
    ['client left after the threshold', facts('client_cancelled', 200, 100, 3500), 'bad'],
    ['client left mid-body after the threshold (the server never had its request)', unsent(facts('client_cancelled', 0, NO_TOKEN, 9000)), undefined],
    ['upstream timed out before the client had sent all of its body', unsent(facts('timeout', 504, NO_TOKEN, 9000)), 'bad'],
  ];
  it.each(cases)('%s', (_what, f, expected) => expect(e2eResult(3, f)).toBe(expected));
});

describe('ITL per token (threshold 0.05 s)', () => {
  it('judges each token by its share of the gap, inclusive at the threshold', () => {
    expect(interTokenIsBad(0.05, 50, 1)).toBe(false);
    expect(interTokenIsBad(0.05, 51, 1)).toBe(true);
    expect(interTokenIsBad(0.05, 150, 3)).toBe(false);
    expect(interTokenIsBad(0.05, 151, 3)).toBe(true);
  });
});

describe('client error statuses (no TTFT or e2e event: refused for what was asked, not served slowly)', () => {
  it('are the 4xx statuses other than 408, 429 and 499, from 400 to 498', () => {
    const clientErrors = [400, 401, 403, 404, 413, 422, 498];
    const others = [0, 200, 399, 408, 429, 499, 500, 503];
    expect(clientErrors.filter(isClientErrorStatus)).toEqual(clientErrors);
    expect(others.filter(isClientErrorStatus)).toEqual([]);
  });
});
