import type { Attributes } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Clock } from '../clock/clock.js';
import { TokenTimeline, type InterTokenSink } from '../clock/token-timeline.js';
import type { ModelLabels } from '../metrics/model-labels.js';
import type { Outcome, Recorder, RequestSummary } from '../metrics/recorder.js';
import { selectTap } from '../taps/select.js';
import type { Tap, TapContext, TapProblemReason } from '../taps/tap.js';

export const DEFAULT_WORKLOAD = 'default';

/** What every request's monitor shares: built once at start-up. */
export interface MonitorDependencies {
  readonly clock: Clock;
  readonly recorder: Recorder;
  readonly models: ModelLabels;
  readonly logger: Logger;
}

/**
 * The observation of one proxied request, beside the stream: owns its timeline and tap, decides its
 * one outcome, and records and logs it exactly once. The proxy calls it at each step; it never
 * touches the sockets, so nothing here can alter what the client receives.
 */
export class RequestMonitor implements InterTokenSink, TapContext {
  readonly timeline: TokenTimeline;
  private readonly deps: MonitorDependencies;
  private readonly method: string;
  private readonly path: string;
  private attributes: Attributes | undefined;
  private model = '';
  private tap: Tap | undefined;
  private streaming = false;
  private status = 0;
  private endedOutcome: Outcome | undefined;
  private done = false;

  constructor(deps: MonitorDependencies, method: string, url: string) {
    this.deps = deps;
    this.method = method;
    // Only the path is logged: query strings can carry credentials.
    const query = url.indexOf('?');
    this.path = query === -1 ? url : url.slice(0, query);
    this.timeline = new TokenTimeline(deps.clock.nowMs(), this);
  }

  /** The request body has been read; `model` is what it asked for, if it said. Fixes the labels. */
  requestBody(model: string | undefined): void {
    this.labels(model);
  }

  response(status: number, contentType: string | undefined): void {
    this.status = status;
    if (status < 200 || status >= 300) return;
    const choice = selectTap(this.method, contentType);
    if (choice === undefined) return;
    this.streaming = choice.streaming;
    this.tap = choice.create(this);
  }

  body(chunk: Buffer): void {
    const nowMs = this.deps.clock.nowMs();
    this.timeline.bytes(nowMs);
    if (this.tap === undefined) return;
    try {
      this.tap.write(chunk, nowMs);
    } catch {
      this.disableTap();
    }
  }

  /** The upstream body ended cleanly; the outcome is settled, but e2e waits for the last byte to the client. */
  bodyEnd(): void {
    if (this.tap !== undefined) {
      try {
        this.tap.end(this.deps.clock.nowMs());
      } catch {
        this.disableTap();
      }
    }
    const timeline = this.timeline;
    if (this.status < 200 || this.status >= 300 || timeline.errorEvent) this.endedOutcome = 'upstream_error';
    else if (this.streaming && !timeline.terminal) this.endedOutcome = 'truncated';
    else this.endedOutcome = 'completed';
  }

  /** The last byte was handed to the client. */
  delivered(): void {
    this.finish(this.endedOutcome ?? 'truncated');
  }

  /** The request ended early: the client left, the upstream failed or went silent. */
  fail(outcome: Outcome, status = this.status): void {
    this.status = status;
    this.finish(outcome);
  }

  get finished(): boolean {
    return this.done;
  }

  // InterTokenSink
  interToken(gapMs: number, tokens: number): void {
    this.deps.recorder.interToken(this.labels(undefined), gapMs, tokens);
  }

  // TapContext
  problem(reason: TapProblemReason): void {
    this.deps.recorder.tapProblem(this.labels(undefined), reason);
  }

  private disableTap(): void {
    this.tap = undefined;
    this.deps.recorder.tapProblem(this.labels(undefined), 'tap_exception');
  }

  /** The request's attributes, fixed on first use (body end, or the first sample if that comes first). */
  private labels(model: string | undefined): Attributes {
    if (this.attributes === undefined) {
      this.model = this.deps.models.label(model);
      this.attributes = this.deps.recorder.requestAttributes(DEFAULT_WORKLOAD, this.model);
      this.deps.recorder.started(this.attributes);
    }
    return this.attributes;
  }

  private finish(outcome: Outcome): void {
    if (this.done) return;
    this.done = true;
    const attributes = this.labels(undefined);
    const timeline = this.timeline;
    const summary: RequestSummary = {
      outcome,
      statusClass: this.status === 0 ? 'none' : `${Math.floor(this.status / 100)}xx`,
      ttfbMs: timeline.ttfbMs,
      ttftMs: timeline.ttftMs,
      tpotMs: timeline.tpotMs,
      e2eMs: this.deps.clock.nowMs() - timeline.startMs,
      inputTokens: timeline.reportedInputTokens,
      outputTokens: timeline.outputTokens,
      tokenSource: timeline.outputTokenSource,
    };
    this.deps.recorder.finished(attributes, summary);
    this.deps.logger.info(
      {
        method: this.method,
        path: this.path,
        status: this.status,
        outcome,
        workload: DEFAULT_WORKLOAD,
        model: this.model,
        ttfb_ms: round(summary.ttfbMs),
        ttft_ms: round(summary.ttftMs),
        tpot_ms: round(summary.tpotMs),
        e2e_ms: round(summary.e2eMs),
        input_tokens: Number.isNaN(summary.inputTokens) ? null : summary.inputTokens,
        output_tokens: summary.outputTokens,
        token_source: summary.tokenSource,
        content_events: timeline.contentEvents,
      },
      'request',
    );
  }
}

function round(ms: number): number | null {
  return Number.isNaN(ms) ? null : Math.round(ms * 1000) / 1000;
}
