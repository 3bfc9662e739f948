import { TokentapError } from '../errors.js';
import { redactUrl } from '../log/redact-url.js';

/**
 * OpenTelemetry export settings, read from the standard OTEL_* variables (the OpenTelemetry
 * specification's "Environment Variable Specification" and "OTLP Exporter Configuration"). Export
 * is off unless an OTLP endpoint is set, so a plain deployment pays nothing for it.
 */

/** OTLP over HTTP in protobuf (the specification's default) or JSON; gRPC is refused, see below. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface OtlpSignal {
  /** Full URL of the signal's endpoint, e.g. http://collector:4318/v1/metrics. */
  readonly url: string;
  readonly protocol: OtlpProtocol;
}

export interface OtlpSettings {
  /** Undefined when metrics are not exported over OTLP. */
  readonly metrics: (OtlpSignal & { readonly intervalMs: number; readonly timeoutMs: number }) | undefined;
  /** Undefined when spans are not exported. */
  readonly traces: OtlpSignal | undefined;
  /** The resource: service.name (tokentap unless OTEL_SERVICE_NAME says otherwise) and OTEL_RESOURCE_ATTRIBUTES. */
  readonly resourceAttributes: Readonly<Record<string, string>>;
}

/** The specification's defaults for OTEL_METRIC_EXPORT_INTERVAL and OTEL_METRIC_EXPORT_TIMEOUT. */
const DEFAULT_EXPORT_INTERVAL_MS = 60_000;
const DEFAULT_EXPORT_TIMEOUT_MS = 30_000;
const DEFAULT_SERVICE_NAME = 'tokentap';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The OTLP settings, or undefined when nothing is to be exported (no endpoint set, or
 * OTEL_SDK_DISABLED=true). Throws TOKENTAP_ERR_CONFIG_INVALID naming every bad variable.
 */
export function loadOtlpSettings(env: Env): OtlpSettings | undefined {
  if (value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const problems: string[] = [];
  const metricsSignal = signal(env, 'METRICS', 'v1/metrics', problems);
  const tracesSignal = signal(env, 'TRACES', 'v1/traces', problems);
  const intervalMs = positiveMs(env, 'OTEL_METRIC_EXPORT_INTERVAL', DEFAULT_EXPORT_INTERVAL_MS, problems);
  const timeoutMs = positiveMs(env, 'OTEL_METRIC_EXPORT_TIMEOUT', DEFAULT_EXPORT_TIMEOUT_MS, problems);
  const resourceAttributes = resource(env, problems);
  if (tracesSignal !== undefined) checkSampler(env, problems);
  if (problems.length > 0) throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', problems);
  if (metricsSignal === undefined && tracesSignal === undefined) return undefined;
  return Object.freeze({
    // The SDK refuses an export timeout above the interval; a short interval shortens the timeout.
    metrics: metricsSignal === undefined ? undefined : Object.freeze({ ...metricsSignal, intervalMs, timeoutMs: Math.min(timeoutMs, intervalMs) }),
    traces: tracesSignal,
    resourceAttributes,
  });
}

/**
 * One signal's endpoint and protocol. The signal-specific endpoint is used as is; the generic one
 * gets the signal's path appended (specification: "OTLP/HTTP ... endpoint URLs for signals").
 * OTEL_METRICS_EXPORTER / OTEL_TRACES_EXPORTER = none turns the signal off.
 */
function signal(env: Env, name: 'METRICS' | 'TRACES', path: string, problems: string[]): OtlpSignal | undefined {
  const exporterVariable = `OTEL_${name}_EXPORTER`;
  const exporter = value(env, exporterVariable);
  if (exporter === 'none') return undefined;
  if (exporter !== undefined && exporter !== 'otlp') {
    problems.push(`${exporterVariable}: "${exporter}" is not supported; expected otlp or none (metrics are also always on the admin listener's /metrics)`);
    return undefined;
  }
  const specificVariable = `OTEL_EXPORTER_OTLP_${name}_ENDPOINT`;
  const specific = value(env, specificVariable);
  const generic = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (specific === undefined && generic === undefined) return undefined;
  const [variable, url] = specific !== undefined ? [specificVariable, specific] : ['OTEL_EXPORTER_OTLP_ENDPOINT', `${(generic as string).replace(/\/+$/, '')}/${path}`];
  if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url)) {
    problems.push(`${variable}: expected an http:// or https:// URL such as http://otel-collector:4318, got "${redactUrl((specific ?? generic) as string)}"`);
    return undefined;
  }
  const protocolVariable = value(env, `OTEL_EXPORTER_OTLP_${name}_PROTOCOL`) !== undefined ? `OTEL_EXPORTER_OTLP_${name}_PROTOCOL` : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = value(env, protocolVariable) ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    // gRPC would need @opentelemetry/exporter-*-otlp-grpc and @grpc/grpc-js as dependencies; every
    // OpenTelemetry Collector also serves OTLP/HTTP (port 4318), so HTTP is what tokentap ships.
    problems.push(`${protocolVariable}: "${protocol}" is not supported; use http/protobuf (the default) or http/json against the collector's OTLP/HTTP port (4318)`);
    return undefined;
  }
  return Object.freeze({ url, protocol });
}

/** The samplers OTEL_TRACES_SAMPLER may name for @opentelemetry/sdk-trace-base 2.12 (its config.js TracesSamplerValues). */
const SAMPLERS = ['parentbased_always_on', 'always_on', 'always_off', 'traceidratio', 'parentbased_always_off', 'parentbased_traceidratio'];

/**
 * The span processor reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG itself, and takes any
 * value it cannot use silently (a diag message nobody sees): an unknown sampler becomes
 * parentbased_always_on, a ratio that is missing or outside [0, 1] becomes 1. A typo such as
 * `OTEL_TRACES_SAMPLER_ARG=10%` would export every request's span, so both are checked here.
 */
function checkSampler(env: Env, problems: string[]): void {
  const sampler = value(env, 'OTEL_TRACES_SAMPLER');
  if (sampler === undefined) return;
  if (!SAMPLERS.includes(sampler)) {
    problems.push(`OTEL_TRACES_SAMPLER: "${sampler}" is not a sampler the OpenTelemetry SDK knows; expected one of ${SAMPLERS.join(', ')}`);
    return;
  }
  if (!sampler.endsWith('traceidratio')) return;
  const text = value(env, 'OTEL_TRACES_SAMPLER_ARG');
  const ratio = text === undefined ? Number.NaN : Number(text);
  if (!(ratio >= 0 && ratio <= 1)) {
    problems.push(`OTEL_TRACES_SAMPLER_ARG: ${sampler} needs the share of traces to export, a number from 0 to 1 such as 0.1; got ${text === undefined ? 'nothing' : `"${text}"`}, which the SDK would take as 1 (every trace)`);
  }
}

function positiveMs(env: Env, variable: string, fallback: number, problems: string[]): number {
  const text = value(env, variable);
  if (text === undefined) return fallback;
  const ms = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(ms > 0)) {
    problems.push(`${variable}: expected a positive whole number of milliseconds, got "${text}"`);
    return fallback;
  }
  return ms;
}

/**
 * OTEL_RESOURCE_ATTRIBUTES is `key=value,key=value` with percent-encoded values (W3C Baggage
 * octets); OTEL_SERVICE_NAME wins over a service.name given there.
 */
function resource(env: Env, problems: string[]): Readonly<Record<string, string>> {
  const attributes: Record<string, string> = { 'service.name': DEFAULT_SERVICE_NAME };
  const list = value(env, 'OTEL_RESOURCE_ATTRIBUTES');
  if (list !== undefined) {
    for (const entry of list.split(',')) {
      if (entry.trim() === '') continue;
      const equals = entry.indexOf('=');
      const key = equals === -1 ? '' : entry.slice(0, equals).trim();
      let decoded: string | undefined;
      try {
        decoded = equals === -1 ? undefined : decodeURIComponent(entry.slice(equals + 1).trim());
      } catch {
        decoded = undefined;
      }
      if (key === '' || decoded === undefined) {
        problems.push(`OTEL_RESOURCE_ATTRIBUTES: expected key=value pairs separated by commas (values percent-encoded), got "${entry}"`);
        continue;
      }
      attributes[key] = decoded;
    }
  }
  const serviceName = value(env, 'OTEL_SERVICE_NAME');
  if (serviceName !== undefined) attributes['service.name'] = serviceName;
  return Object.freeze(attributes);
}

function value(env: Env, name: string): string | undefined {
  const text = env[name]?.trim();
  return text === undefined || text === '' ? undefined : text;
}
