import type { Meter } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { DcgmSettings } from '../config/load.js';
import { DcgmReader, type DcgmScrapeErrorReason } from './dcgm-reader.js';
import { createScrapeErrorCounter, registerGpuGauges } from './gpu-gauges.js';
import { IDENTITY_ENV, isAnonymous } from './pod-identity.js';
import { redactUrl } from '../log/redact-url.js';

/**
 * Reads this pod's GPUs from the DCGM exporter and exports them as tokentap_gpu_* gauges. Problems
 * are logged when they start and when they end, not on every scrape, so a dead exporter does not
 * flood the log at the scrape interval; the error counter carries every occurrence. Scraping
 * begins with the returned reader's start().
 */
export function createGpuMonitor(settings: DcgmSettings, meter: Meter, logger: Logger): DcgmReader {
  const identity = settings.identity;
  if (isAnonymous(identity)) {
    logger.warn(
      { dcgm_url: redactUrl(settings.url) },
      `dcgm: neither ${IDENTITY_ENV.podName} nor ${IDENTITY_ENV.visibleDevices} names this pod or its GPUs, so no DCGM series can be claimed; set them from the downward API`,
    );
  }
  const countError = createScrapeErrorCounter(meter);
  let failing: DcgmScrapeErrorReason | undefined;
  const reader = new DcgmReader({
    url: settings.url,
    intervalMs: settings.intervalMs,
    timeoutMs: settings.timeoutMs,
    identity,
    onError: (reason, detail) => {
      countError(reason);
      if (reason !== failing) logger.warn({ reason }, `dcgm: ${detail}`);
      failing = reason;
    },
    onSuccess: (gpus) => {
      // A scrape with a blank field still succeeds; keeping 'sentinel' stops it being re-logged each time.
      if (failing === undefined || failing === 'sentinel') return;
      logger.info({ gpus: gpus.length }, 'dcgm: reading GPU metrics again');
      failing = undefined;
    },
  });
  registerGpuGauges(meter, () => reader.gpus);
  return reader;
}
