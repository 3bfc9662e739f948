import http from 'node:http';
import type { Logger } from 'pino';
import type { AdapterColdStarts } from '../metrics/adapter-cold-starts.js';
import type { ModelLabels, ServedList } from '../metrics/model-labels.js';
import { modelParentsOf, servedModelsOf } from './served-models.js';
import { GrowableBytes } from '../bytes/growable-bytes.js';
import type { LimitCounters, LimitName } from '../metrics/limit-counters.js';

export interface ModelDiscoverySettings {
  /** Listing endpoints, tried in order until one answers with model names. */
  readonly paths: readonly string[];
  /** Time between two successful discoveries. */
  readonly intervalMs: number;
  /** Time before the next try after a failed discovery (the model is still loading, or the listing was too slow). */
  readonly retryMs: number;
  /**
   * Each listing request is abandoned this long after it was sent, however the bytes arrive: a
   * socket idle timeout alone let a listing that drips one byte every 500 ms hold discovery forever.
   */
  readonly timeoutMs: number;
  /** A request to a LoRA adapter idle for longer than this is a cold start (metrics/adapter-cold-starts.ts). */
  readonly adapterIdleAfterMs: number;
}

/**
 * A listing is a few hundred bytes (vLLM: about 400 per model); this bounds what a confused
 * upstream can make the sidecar buffer (DESIGN.md section 10: every resource is bounded).
 */
const MAX_LISTING_BYTES = 1024 * 1024;

/** Names on the discovery log line: 64 of at most 128 characters, about 8 KiB at most. */
const LOGGED_NAMES = 64;

export type DiscoveryOutcome = { readonly ok: true; readonly path: string; readonly models: readonly string[] } | { readonly ok: false; readonly problems: readonly string[] };


/**
 * Asks the upstream which models it serves, at start-up and then every `intervalMs`, and hands the
 * names to ModelLabels. The request goes from the sidecar straight to the upstream on a connection
 * of its own (agent: false), never through the proxy listener, so it is not traffic: it appears in
 * no request metric. A failed discovery keeps the last list and is retried after `retryMs`; before
 * the first success the labels keep the first-seen fallback meanwhile.
 */
export class ModelDiscovery {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The names kept at the last success, to log a changed list; undefined before the first (an empty list is logged too). */
  private lastModels: string | undefined;
  private failing = false;
  private succeededOnce = false;

  constructor(
    private readonly upstream: URL,
    private readonly settings: ModelDiscoverySettings,
    private readonly models: ModelLabels,
    private readonly logger: Logger,
    /** Told each listing's adapters, so it tracks their idle time. */
    private readonly coldStarts?: AdapterColdStarts,
    /** Where a listing refused at MAX_LISTING_BYTES or abandoned at the deadline is counted: the warning comes once per run of failures. */
    private readonly limitCounters?: LimitCounters,
  ) {}

  start(): void {
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  /** One discovery: each path in turn until one lists models. */
  async refresh(): Promise<DiscoveryOutcome> {
    const problems: string[] = [];
    for (const path of this.settings.paths) {
      const answer = await getJson(new URL(path, this.upstream), this.settings.timeoutMs);
      if (!answer.ok) {
        if (answer.limit !== undefined) this.limitCounters?.tripped(answer.limit);
        problems.push(`${path}: ${answer.problem}`);
        continue;
      }
      const models = servedModelsOf(answer.body);
      if (models === undefined) {
        problems.push(`${path}: the answer lists no model names`);
        continue;
      }
      const served = this.models.serve(models, modelParentsOf(answer.body));
      this.coldStarts?.listed(served.adapters);
      return this.report({ ok: true, path, models }, served);
    }
    return this.report({ ok: false, problems });
  }

  private report(outcome: DiscoveryOutcome, served?: ServedList): DiscoveryOutcome {
    if (outcome.ok && served !== undefined) {
      this.succeededOnce = true;
      this.failing = false;
      const key = served.kept.join('\n');
      if (key !== this.lastModels) {
        // The names as ModelLabels kept them (each at most 128 characters), not the listing (a 10 KB
        // name was logged whole), and at most LOGGED_NAMES of them: max_models may be 1000.
        this.logger.info(
          { models: served.kept.slice(0, LOGGED_NAMES), notLogged: Math.max(0, served.kept.length - LOGGED_NAMES), listed: outcome.models.length, skipped: served.skipped, path: outcome.path },
          'model discovery: the upstream serves these models; other names are labelled "other"',
        );
        if (served.withoutRoom > 0) {
          this.logger.warn(
            { withoutRoom: served.withoutRoom, maxModels: this.models.maxModels },
            'model discovery: every model label value (metrics.max_models) is taken by names served earlier, whose series stay until restart; newly served names are labelled "other" (raise metrics.max_models or restart the sidecar)',
          );
        }
      }
      this.lastModels = key;
    } else if (!outcome.ok && !this.failing) {
      // Once per failing streak, not on every retry while the model loads.
      this.failing = true;
      this.logger.warn(
        { problems: outcome.problems, kept: this.succeededOnce ? 'the last list' : 'the first names seen', retryInMs: this.settings.retryMs },
        'model discovery failed; retrying',
      );
    }
    return outcome;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.refresh().then((outcome) => this.schedule(outcome.ok ? this.settings.intervalMs : this.settings.retryMs));
    }, delayMs);
    // Never what keeps the process alive.
    this.timer.unref();
  }
}

type JsonAnswer = { readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly problem: string; readonly limit?: LimitName };

function getJson(url: URL, timeoutMs: number): Promise<JsonAnswer> {
  return new Promise((resolve) => {
    // The whole exchange (connect, head and body) within timeoutMs; a socket idle timeout fires only on silence.
    const deadline = setTimeout(() => settle({ ok: false, problem: `no whole answer within ${timeoutMs} ms`, limit: 'model_listing_timeout' }), timeoutMs);
    deadline.unref();
    // Whatever the answer, the connection ends with it (agent: false, never reused): a 503 or a
    // redirect whose body never ended was read for as long as the upstream sent it, deadline or not.
    const settle = (answer: JsonAnswer): void => {
      clearTimeout(deadline);
      resolve(answer);
      request.destroy();
    };
    const request = http.get(url, { agent: false, headers: { accept: 'application/json' } }, (response) => {
      const status = response.statusCode ?? 0;
      if (status !== 200) {
        settle({ ok: false, problem: `HTTP ${status}` });
        return;
      }
      // Copied into one buffer, not kept as the pieces node:http hands out: an upstream sending the
      // listing a byte per chunk made a 1 MiB answer a million objects (about 300 MiB).
      const body = new GrowableBytes(MAX_LISTING_BYTES);
      response.on('data', (chunk: Buffer) => {
        if (body.length + chunk.length > MAX_LISTING_BYTES) {
          settle({ ok: false, problem: `answer larger than ${MAX_LISTING_BYTES} bytes`, limit: 'model_listing_bytes' });
          return;
        }
        body.append(chunk);
      });
      response.on('end', () => {
        try {
          settle({ ok: true, body: JSON.parse(body.view().toString('utf8')) as unknown });
        } catch {
          settle({ ok: false, problem: 'the answer is not JSON' });
        }
      });
      response.on('error', (error) => settle({ ok: false, problem: error.message }));
    });
    request.on('error', (error: NodeJS.ErrnoException) => settle({ ok: false, problem: error.code ?? error.message }));
  });
}
