import { ExpositionParseError, parseExposition } from './exposition-parser.js';
import { isReadField, labelSetKey, MAX_GPU_LABEL_SETS, MAX_GPUS_PER_SCRAPE, toGpuReadings, type GpuReading } from './gpu-readings.js';
import { selectOwnSeries } from './own-series.js';
import type { PodIdentity } from './pod-identity.js';
import { redactUrl } from '../log/redact-url.js';

/** The `reason` label of tokentap_dcgm_scrape_errors_total. */
export type DcgmScrapeErrorReason =
  /** Connection refused, reset, DNS failure: the exporter is not there. */
  | 'unreachable'
  /** No complete answer within `dcgm.timeout`. */
  | 'timeout'
  /** The exporter answered with a non-2xx status. */
  | 'http_status'
  /** The body is not Prometheus text, or larger than MAX_BODY_BYTES. */
  | 'bad_text'
  /** A field tokentap reads held DCGM's blank/sentinel value (that gauge is then absent). */
  | 'sentinel'
  /** The exporter answered, but no series belongs to this pod or its GPUs. */
  | 'no_match';

export interface DcgmReaderOptions {
  readonly url: URL;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly identity: PodIdentity;
  readonly onError: (reason: DcgmScrapeErrorReason, detail: string) => void;
  /** After each scrape that found this pod's GPUs. */
  readonly onSuccess?: (gpus: readonly GpuReading[]) => void;
}

/**
 * A node exporter's /metrics is a few hundred KB for 8 GPUs with the default field set; 8 MiB
 * leaves ample room while refusing a runaway body.
 */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/**
 * Scrapes the node-local DCGM exporter on its own timer, off the proxy's path: the proxy never
 * waits for it, and the gauges read whatever the last scrape left. The next scrape is scheduled
 * only after the previous one has finished (answered, failed or timed out), so a slow or dead
 * exporter can never pile up requests. Any failed scrape clears the readings, so the gauges go
 * absent rather than repeating an old value or showing a fake zero.
 */
export class DcgmReader {
  private readings: readonly GpuReading[] = [];
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private abort: AbortController | undefined;
  private stopped = false;
  /** Every GPU label set ever given to the gauges (labelSetKey), at most MAX_GPU_LABEL_SETS. */
  private readonly labelSets = new Set<string>();

  /** The URL as problems name it: userinfo and query redacted (they may hold credentials). */
  private readonly shownUrl: string;

  constructor(private readonly options: DcgmReaderOptions) {
    this.shownUrl = redactUrl(options.url);
  }

  /** The GPUs of this pod as of the last scrape; empty when it failed or found none. */
  get gpus(): readonly GpuReading[] {
    return this.readings;
  }

  /** Framebuffer in use over this pod's GPUs (or MIG instances), as last scraped; undefined when unknown. */
  memoryUsedBytes(): number | undefined {
    let sum: number | undefined;
    for (const gpu of this.readings) {
      if (gpu.memoryUsedBytes !== undefined) sum = (sum ?? 0) + gpu.memoryUsedBytes;
    }
    return sum;
  }

  /** Starts scraping at once, then every interval after each scrape ends. */
  start(): void {
    this.stopped = false;
    this.tick();
  }

  /** Resolves once any scrape in progress has been aborted and no further one is scheduled. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort?.abort();
    await this.inFlight;
  }

  /** One scrape; exposed so tests can step the reader without waiting for the timer. */
  async scrapeOnce(): Promise<void> {
    try {
      this.readings = await this.fetchReadings();
      this.options.onSuccess?.(this.readings);
    } catch (error) {
      this.readings = [];
      const failure = error instanceof ScrapeFailure ? error : new ScrapeFailure('unreachable', `${this.shownUrl}: ${describe(error).replaceAll(this.options.url.href, this.shownUrl)}`);
      if (!this.stopped) this.options.onError(failure.reason, failure.message);
    }
  }

  private tick(): void {
    if (this.stopped) return;
    this.inFlight = this.scrapeOnce().finally(() => {
      this.inFlight = undefined;
      if (this.stopped) return;
      this.timer = setTimeout(() => this.tick(), this.options.intervalMs);
      // The scrape timer alone must not keep the process alive at shutdown.
      this.timer.unref();
    });
  }

  private async fetchReadings(): Promise<readonly GpuReading[]> {
    const text = await this.fetchText();
    let samples;
    try {
      samples = parseExposition(text, isReadField);
    } catch (error) {
      if (error instanceof ExpositionParseError) throw new ScrapeFailure('bad_text', `${this.shownUrl}: ${error.message}`);
      throw error;
    }
    const own = selectOwnSeries(samples, this.options.identity);
    const { gpus, sawSentinel, badLabels, devices } = toGpuReadings(own);
    if (devices > MAX_GPUS_PER_SCRAPE) throw new ScrapeFailure('bad_text', `${this.shownUrl}: ${devices} GPU series for this pod, more than the ${MAX_GPUS_PER_SCRAPE} a node can hold; none is read`);
    if (sawSentinel) this.options.onError('sentinel', `${this.shownUrl}: a GPU field of this pod holds DCGM's blank value`);
    if (badLabels > 0) this.options.onError('bad_text', `${this.shownUrl}: ${badLabels} GPU series of this pod skipped: a gpu, UUID, GPU_I_ID or GPU_I_PROFILE label longer than 128 characters or holding a control character`);
    if (gpus.length === 0) throw new ScrapeFailure('no_match', `${this.shownUrl}: no GPU series for this pod or its GPUs`);
    const known = this.withinLabelSets(gpus);
    const beyond = gpus.length - known.length;
    if (beyond > 0) {
      const problem = `${beyond} GPU series of this pod skipped: their labels would make more than ${MAX_GPU_LABEL_SETS} distinct GPU label sets since start (the exporter's gpu, UUID or MIG labels keep changing); restart tokentap to read them`;
      if (known.length === 0) throw new ScrapeFailure('bad_text', `${this.shownUrl}: ${problem}`);
      this.options.onError('bad_text', `${this.shownUrl}: ${problem}`);
    }
    return known;
  }

  /** The readings whose label sets were given to the gauges before, or still fit under MAX_GPU_LABEL_SETS (then remembered). */
  private withinLabelSets(gpus: readonly GpuReading[]): readonly GpuReading[] {
    const known: GpuReading[] = [];
    for (const gpu of gpus) {
      const key = labelSetKey(gpu.labels);
      if (!this.labelSets.has(key)) {
        if (this.labelSets.size >= MAX_GPU_LABEL_SETS) continue;
        this.labelSets.add(key);
      }
      known.push(gpu);
    }
    return known;
  }

  private async fetchText(): Promise<string> {
    const abort = new AbortController();
    this.abort = abort;
    const timer = setTimeout(() => abort.abort(new ScrapeFailure('timeout', `${this.shownUrl}: no answer within ${this.options.timeoutMs} ms`)), this.options.timeoutMs);
    try {
      const response = await fetch(this.options.url, { signal: abort.signal, headers: { accept: 'text/plain' } });
      if (!response.ok) {
        await response.body?.cancel();
        throw new ScrapeFailure('http_status', `${this.shownUrl}: HTTP ${response.status}`);
      }
      return await readCapped(response, this.shownUrl);
    } catch (error) {
      if (abort.signal.aborted && abort.signal.reason instanceof ScrapeFailure) throw abort.signal.reason;
      throw error;
    } finally {
      clearTimeout(timer);
      this.abort = undefined;
    }
  }
}

class ScrapeFailure extends Error {
  constructor(
    readonly reason: DcgmScrapeErrorReason,
    message: string,
  ) {
    super(message);
  }
}

async function readCapped(response: Response, where: string): Promise<string> {
  if (response.body === null) return '';
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const parts: string[] = [];
  let size = 0;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) throw new ScrapeFailure('bad_text', `${where}: body larger than ${MAX_BODY_BYTES} bytes`);
      parts.push(decoder.decode(chunk, { stream: true }));
    }
    parts.push(decoder.decode());
  } catch (error) {
    if (error instanceof TypeError && /encoded data|decode/i.test(error.message)) throw new ScrapeFailure('bad_text', `${where}: body is not UTF-8`);
    throw error;
  }
  return parts.join('');
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}
