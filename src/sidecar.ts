import type { Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createAdminServer, probeUpstream } from './admin/admin-server.js';
import { packageVersion } from './admin/package-version.js';
import { StatusSource } from './admin/status-source.js';
import { systemClock, type Clock } from './clock/clock.js';
import type { Settings } from './config/load.js';
import { createGpuMonitor } from './dcgm/gpu-monitor.js';
import { ModelDiscovery } from './discovery/model-discovery.js';
import { TokentapError } from './errors.js';
import { DrainState } from './lifecycle/drain-state.js';
import { FinalScrape } from './lifecycle/final-scrape.js';
import { InFlightTracker } from './metrics/in-flight-band.js';
import { createPodTime } from './metrics/pod-time.js';
import { drainProxy, type DrainReport } from './lifecycle/drain-proxy.js';
import { settleWithin } from './lifecycle/settle-within.js';
import { registerBuildInfo } from './metrics/build-info.js';
import { AdapterColdStarts } from './metrics/adapter-cold-starts.js';
import { registerModelInfo } from './metrics/model-info.js';
import { droppedLogLines } from './log/logger.js';
import { RequestLineWriter } from './log/request-line.js';
import { LimitCounters } from './metrics/limit-counters.js';
import { ModelLabels } from './metrics/model-labels.js';
import { Recorder } from './metrics/recorder.js';
import { Telemetry } from './metrics/telemetry.js';
import { HeldBytesBudget } from './proxy/held-bytes.js';
import { ProfileStore } from './profile/profile-store.js';
import { createProxyServer } from './proxy/proxy-server.js';
import { UsageInjector } from './proxy/usage-injection.js';
import { WorkloadMatcher } from './slo/workload-matcher.js';
import { RouteTable } from './taps/route-table.js';
import { TapSelector } from './taps/select.js';
import { attachExportFailureCounter } from './tracing/otlp-export-health.js';
import { startOtlp } from './tracing/otlp-pipeline.js';
import type { OtlpSettings } from './tracing/otlp-settings.js';
import { VERSION } from './version.js';

export interface RunningSidecar {
  readonly proxyUrl: string;
  readonly adminUrl: string;
  /** HOST:PORT the proxy listener bound, as the kernel reports it (the real port when 0 was asked for). */
  readonly proxyAddress: string;
  /** HOST:PORT the admin listener bound. */
  readonly adminAddress: string;
  readonly telemetry: Telemetry;
  /** The model labels, which model discovery feeds. */
  readonly models: ModelLabels;
  /** Fails /readyz, stops accepting, lets in-flight requests finish until `timeoutMs`, cuts the rest. */
  drain(timeoutMs: number, trigger: string): Promise<DrainReport>;
  /**
   * Cuts what is left, closes the proxy listener, waits up to final_scrape_wait for a scrape of the
   * final counts (/metrics answered throughout the drain), closes the admin listener, makes the final OTLP export.
   */
  close(): Promise<void>;
  /**
   * Cuts every request in flight at once and records each as `shutdown` (logged, counted),
   * synchronously: for a second shutdown signal, just before the process exits. Returns how many.
   */
  cutNow(): number;
  /** tokentap_limit_exceeded_total's counts. */
  readonly limitCounters: LimitCounters;
}

/** How long the final OTLP export may take at shutdown (inside serve's flush allowance). */
const FINAL_EXPORT_BUDGET_MS = 5_000;

/** The composition root: wires settings into the two listeners. No logic of its own. */
export async function startSidecar(
  settings: Settings,
  logger: Logger,
  clock: Clock = systemClock,
  otlpSettings: OtlpSettings | undefined = undefined,
  /**
   * `statusNotice`: a line at the top of the status page (the demo says its faults are on purpose).
   * `profileKey`: the fingerprint key, for the test that proves it never leaves; drawn at random otherwise.
   */
  extras: { readonly statusNotice?: string; readonly profileKey?: Buffer } = {},
): Promise<RunningSidecar> {
  const otlp = await startOtlp(otlpSettings, clock, settings.upstream, logger, settings.otlpHistograms, settings.native.maxBuckets);
  const drain = new DrainState();
  const finalScrape = new FinalScrape();
  const telemetry = new Telemetry(otlp.metricPush, otlp.resource, { histograms: settings.histograms, native: settings.native });
  attachExportFailureCounter(telemetry.meter, otlp.exportHealth);
  registerBuildInfo(telemetry.meter, { version: VERSION, nodeVersion: process.versions.node, commit: settings.commit });
  const models = new ModelLabels(settings.maxModels);
  registerModelInfo(telemetry.meter, models);
  const coldStarts = settings.modelDiscovery === undefined ? undefined : new AdapterColdStarts(clock, settings.modelDiscovery.adapterIdleAfterMs);
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  const routes = new RouteTable(settings.routes);
  const gpus = settings.dcgm === undefined ? undefined : createGpuMonitor(settings.dcgm, telemetry.meter, logger);
  const podTime = createPodTime(telemetry.meter, clock, settings.cost, gpus);
  const limits = settings.limits;
  const limitCounters = new LimitCounters();
  limitCounters.addSource('log_buffer_bytes', () => droppedLogLines(logger));
  limitCounters.addSource('otlp_span_queue', () => otlp.droppedSpans());
  limitCounters.register(telemetry.meter);
  const heldBytes = new HeldBytesBudget(limits.heldBodyBytes);
  const profiles = settings.profiles === undefined || !settings.observe ? undefined : new ProfileStore(settings.profiles, clock, { key: extras.profileKey });
  profiles?.register(telemetry.meter);
  const inFlight = new InFlightTracker();
  const proxy = createProxyServer({
    upstream: settings.upstream,
    upstreamIdleTimeoutMs: settings.upstreamIdleTimeoutMs,
    upstreamRetryBodyLimitBytes: settings.upstreamRetryBodyLimitBytes,
    upstreamProtocol: settings.upstreamProtocol,
    observe: settings.observe,
    limits,
    counters: limitCounters,
    heldBytes,
    usageInjection: settings.injectUsage ? new UsageInjector(routes, { maxBytes: limits.rewrittenBodyBytes, budget: heldBytes, counters: limitCounters }) : undefined,
    monitor: { clock, recorder, models, logger, requestLines: new RequestLineWriter(logger), workloads: new WorkloadMatcher(settings.workloads), tracer: otlp.tracer, drain, taps: new TapSelector(routes), gpuMemory: gpus, inFlight, coldStarts, profiles, podTime },
  });
  const admin = createAdminServer({
    telemetry,
    upstream: settings.upstream,
    upstreamHealthPath: settings.upstreamHealthPath,
    drain,
    status: new StatusSource({
      telemetry,
      settings,
      clock,
      version: packageVersion(),
      probe: () => probeUpstream(new URL(settings.upstreamHealthPath, settings.upstream)),
      drain,
      notice: extras.statusNotice,
      inFlight,
    }),
    profiles: profiles === undefined ? undefined : { store: profiles, limitCounters },
    limitCounters,
    allowedHosts: settings.adminAllowedHosts,
    finalScrape,
  });

  await listen(proxy, settings.listen.host, settings.listen.port, 'listen');
  try {
    await admin.listen({ host: settings.adminListen.host, port: settings.adminListen.port });
  } catch (error) {
    proxy.close();
    throw new TokentapError('TOKENTAP_ERR_LISTEN', [`admin_listen ${settings.adminListen.host}:${settings.adminListen.port}: ${(error as Error).message}`]);
  }
  const adminAddress = admin.server.address() as AddressInfo;
  // Started once both listeners are up, so a failed start leaves no scrape timer behind.
  gpus?.start();
  const discovery = settings.modelDiscovery === undefined ? undefined : new ModelDiscovery(settings.upstream, settings.modelDiscovery, models, logger, coldStarts, limitCounters);
  discovery?.start();

  return {
    proxyUrl: urlOf(proxy.address() as AddressInfo),
    adminUrl: urlOf(adminAddress),
    proxyAddress: boundAddress(proxy.address() as AddressInfo),
    adminAddress: boundAddress(adminAddress),
    telemetry,
    models,
    limitCounters,
    drain: (timeoutMs, trigger) => drainProxy(proxy, drain, timeoutMs, trigger),
    cutNow() {
      drain.beginDrain('second signal');
      drain.beginCut();
      return proxy.cutAll();
    },
    async close() {
      discovery?.stop();
      proxy.closeAllConnections();
      await Promise.all([new Promise((resolve) => proxy.close(resolve)), gpus?.stop()]);
      // Every request is recorded by now (the drain waited for each); one scrape must read them.
      if (settings.finalScrapeWaitMs > 0) {
        if (await finalScrape.waitFromNow(settings.finalScrapeWaitMs)) logger.info('final scrape served: exiting');
        else logger.warn({ final_scrape_wait_ms: settings.finalScrapeWaitMs }, 'no scrape within final_scrape_wait: the counts recorded since the last scrape reach Prometheus only through OTLP');
      }
      await admin.close();
      // Shutting the providers down makes the final OTLP export (metrics and buffered spans).
      const finalExport = await settleWithin(Promise.all([telemetry.shutdown(), otlp.shutdown()]), FINAL_EXPORT_BUDGET_MS);
      if (finalExport !== 'done') logger.warn({ problem: String(finalExport) }, 'final OTLP export incomplete');
    },
  };
}

function listen(server: Server, host: string, port: number, setting: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error) => reject(new TokentapError('TOKENTAP_ERR_LISTEN', [`${setting} ${host}:${port}: ${error.message}`])));
    server.listen(port, host, () => resolve());
  });
}

function boundAddress(address: AddressInfo): string {
  return `${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host}:${address.port}`;
}
