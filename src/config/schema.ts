import { z } from 'zod';
import { parseDurationMs } from './duration.js';
import { suggestKeysOf } from './key-suggestion.js';
import { matcherProblems } from './promql-matchers.js';
import { pathPatternProblem, PROTOCOLS } from '../taps/route-table.js';
import { redactUrl } from '../log/redact-url.js';

/**
 * The configuration file's schema, validated once at start-up (STYLE.md habit 2): unknown keys are
 * errors, every problem is reported with its path, and the result is frozen. zod is used rather
 * than hand-written checks because it reports all problems at once, with paths, for free.
 */

const listenAddress = z.string().superRefine((value, ctx) => {
  if (parseListenAddress(value) === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected HOST:PORT with a port from 0 to 65535, got "${value}"` });
  }
});

const upstreamUrl = z.string().superRefine((value, ctx) => {
  // `localhost:8000` parses as a URL of scheme "localhost:", which would be reported as an
  // unsupported scheme; what is missing is the scheme itself.
  if (!value.includes('://')) {
    ctx.addIssue({ code: 'custom', message: `"${value}" has no scheme: add http://, as in http://${value}` });
    return;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `expected an http:// URL such as http://127.0.0.1:8000, got "${redactUrl(value)}"` });
    return;
  }
  if (url.protocol !== 'http:') {
    ctx.addIssue({ code: 'custom', message: `only http:// upstreams are supported (the inference server is in the same pod), got "${url.protocol}"` });
  }
  if (url.search || url.hash) {
    ctx.addIssue({ code: 'custom', message: 'must not carry a query string or fragment' });
  }
  // Refused rather than used as a prefix: a path here is almost always an OpenAI base URL
  // (`http://host:8000/v1`), and clients already send `/v1/chat/completions`, which a prefix would
  // make `/v1/v1/...`; the route table and the taps match the client's own path. Silently ignored, it misled users.
  if (url.pathname !== '/') {
    ctx.addIssue({
      code: 'custom',
      message: `"${redactUrl(value)}" has a path (${url.pathname}): requests keep their own path (/v1/chat/completions goes to /v1/chat/completions), so give the server alone, as in ${url.protocol}//${url.host}, and keep ${url.pathname.replace(/\/$/, '')} in the clients' base URL (http://TOKENTAP_HOST:8080${url.pathname.replace(/\/$/, '')})`,
    });
  }
});

/**
 * The longest duration a setting may hold: a year. Thresholds, `for:` clauses and windows are
 * rendered into PromQL, whose durations end near 292 years, and a 300-digit number would reach it
 * as Infinity; nothing tokentap measures or waits for comes near a year.
 */
const MAX_DURATION_MS = 8760 * 3_600_000;

/**
 * The longest a timer-driven setting may hold: Node's timers take at most 2^31 - 1 ms (about 24.8
 * days) and run a longer delay after 1 ms instead, so a `dcgm.interval` of 1000h would scrape the
 * exporter in a loop.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

function boundedDuration(maxMs: number, most: string) {
  return z
    .string({
      // A bare number (`ttft: 200`) reaches here as a number: say what is missing, the unit.
      error: (issue) => (typeof issue.input === 'number' ? `expected a duration like 200ms (a number needs a unit: ms, s, m or h), got ${issue.input}` : 'expected a duration like 200ms, 30s or 5m'),
    })
    .superRefine((value, ctx) => {
      const ms = parseDurationMs(value);
      // Prometheus and Grafana write days as "7d"; the config's units stop at hours.
      const days = /^(\d+)d$/.exec(value.trim())?.[1];
      if (days !== undefined && Number(days) > 0) {
        ctx.addIssue({ code: 'custom', message: `expected a duration in ms, s, m or h: days are written in hours, "${days}d" is "${Number(days) * 24}h"` });
      } else if (ms === undefined || ms <= 0) {
        ctx.addIssue({ code: 'custom', message: `expected a positive duration like "200ms", "30s" or "5m", got "${value}"` });
      } else if (ms > maxMs) {
        ctx.addIssue({ code: 'custom', message: `expected a duration of at most ${most}, got "${value}"` });
      }
    });
}

const duration = boundedDuration(MAX_DURATION_MS, '8760h (a year)');
/** A duration the sidecar waits with a timer (MAX_TIMER_MS). */
const timerDuration = boundedDuration(MAX_TIMER_MS, '596h (about 24 days, the longest a Node timer waits)');

const bucketList = z
  .array(z.number().positive().finite(), { error: 'expected a list of positive numbers (seconds or tokens)' })
  .min(1)
  .superRefine((values, ctx) => {
    for (let i = 1; i < values.length; i++) {
      if ((values[i] as number) <= (values[i - 1] as number)) {
        ctx.addIssue({ code: 'custom', path: [i], message: 'bucket boundaries must be strictly increasing' });
      }
    }
  });

/** A workload's name: label-safe, since it becomes the `workload` label and part of alert and dashboard names. */
export const WORKLOAD_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

const workloadName = z
  .string({ error: 'expected a workload name, e.g. "chat"' })
  .regex(WORKLOAD_NAME, { error: 'expected a name of lower-case letters, digits, "_" or "-", starting with a letter (it becomes a label value)' });

/**
 * How a request is assigned to a workload. All given conditions must hold; workloads are tried in
 * order, the first match wins, and a request that matches none belongs to the last workload.
 */
const workloadMatchConditions = z.strictObject({
  /** Request headers that must be present with exactly these values; names are case-insensitive. */
  // Key names are checked in superRefine: zod reports a bad record key only as "Invalid key in record".
  header: z
    .record(z.string(), z.string({ error: 'expected the header value as a string (quote numbers and booleans)' }), {
      error: 'expected a mapping of header names to values, e.g. { x-workload: chat }',
    })
    .superRefine((headers, ctx) => {
      const seen = new Map<string, string>();
      for (const [name, value] of Object.entries(headers)) {
        if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'expected an HTTP header name' });
        // RFC 9110 5.5: no request carries such a value, so the condition could never match.
        else if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value)) ctx.addIssue({ code: 'custom', path: [name], message: 'expected a header value without control characters (no request can carry one, so it would never match)' });
        // RFC 9110 5.5: the whitespace around a field value is not part of it; Node strips it, and
        // HTTP/2 (RFC 9113 8.2.1) refuses a value that has it.
        else if (/^[ \t]|[ \t]$/.test(value)) {
          ctx.addIssue({ code: 'custom', path: [name], message: 'expected a header value without leading or trailing spaces or tabs (HTTP strips them from every request, so it would never match)' });
        } else {
          // Node reads each byte of a header value as one Latin-1 character (HTTP/1.1 and HTTP/2
          // alike), so no request's value holds a character above U+00FF.
          const wide = /[^\u0000-\u00ff]/u.exec(value)?.[0];
          if (wide !== undefined) {
            ctx.addIssue({ code: 'custom', path: [name], message: `expected a header value of ASCII characters: a request's header is read one byte per character, so "${wide}" (several bytes in UTF-8) would never match` });
          }
        }
        const first = seen.get(name.toLowerCase());
        if (first !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [name],
            message: `the same header as ${first} (header names are case-insensitive): a request carries one value, so the two conditions never both hold; keep one`,
          });
        } else seen.set(name.toLowerCase(), name);
      }
    })
    .optional(),
  /** Request path without the query: exact, or a prefix when it ends with "*" (`/v1/*`). */
  path: z
    .string({ error: 'expected a path such as /v1/chat/completions' })
    .startsWith('/', { error: 'expected a path starting with "/"' })
    .refine((path) => !path.slice(0, -1).includes('*'), { error: 'expected "*" only at the end (a prefix match such as /v1/*)' })
    .superRefine((path, ctx) => {
      // The matcher compares the path without its query (a request never sends a fragment).
      const query = path.search(/[?#]/);
      if (query !== -1) {
        ctx.addIssue({ code: 'custom', message: `expected a path without a query string ("${path.slice(query)}"): requests are matched on their path alone, so this would never match` });
      }
    })
    .optional(),
  /** The `model` the request body asks for, exactly. */
  model: z
    .string({ error: 'expected the model name as the request body gives it, a string (quote numbers)' })
    .min(1, { error: 'expected the model name as the request body gives it, a string (quote numbers)' })
    .optional(),
}).refine((m) => (m.header !== undefined && Object.keys(m.header).length > 0) || m.path !== undefined || m.model !== undefined, {
  error: 'expected at least one condition: header, path or model (leave out `match` for a catch-all)',
});

const workloadMatchList = z.array(workloadMatchConditions).min(1, { error: 'expected at least one set of match conditions' });
type MatchConditionsConfig = z.infer<typeof workloadMatchConditions>;

/**
 * One set of conditions, or a list of alternatives of which any one suffices ("this header OR that
 * path"). Dispatched by shape rather than with z.union, which reports a nested problem (a header
 * value that is a number) only as "no union member matched".
 */
const workloadMatch = suggestKeysOf(
  z.unknown().transform((value, ctx): MatchConditionsConfig | MatchConditionsConfig[] => {
    if (typeof value !== 'object' || value === null) {
      ctx.addIssue({ code: 'custom', message: 'expected a mapping of match conditions (header, path, model), or a list of such mappings' });
      return z.NEVER;
    }
    const parsed = Array.isArray(value) ? workloadMatchList.safeParse(value) : workloadMatchConditions.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue });
    return z.NEVER;
  }),
  workloadMatchConditions,
);

/** A workload's service-level objectives: the share of events that must be good, and what good means. */
const sloObjectives = z
  .strictObject(
    {
      /** Target ratio of good events, e.g. 0.99. */
      objective: z
        .number({
          error: (issue) =>
            issue.input === undefined
              ? 'required: the share of events that must be good, a ratio between 0 and 1 such as 0.99'
              : `expected a ratio between 0 and 1, e.g. 0.99 (99 % is 0.99), got ${JSON.stringify(issue.input)}`,
        })
        .gt(0, { error: 'expected a ratio between 0 and 1, e.g. 0.99' })
        .lt(1, { error: 'expected a ratio between 0 and 1, e.g. 0.99 (1 leaves no error budget)' }),
    /** A request is good for TTFT when its first token came within this time. */
    ttft: duration.optional(),
    /** A token is good for ITL when its per-token gap is within this time. */
    itl: duration.optional(),
    /** A request is good for e2e when it finished within this time. */
    e2e: duration.optional(),
    /** What the TTFT threshold applies to: the first token of any kind (default) or the first answer token (reasoning excluded). */
    ttft_on: z.enum(['first_token', 'first_answer'], { error: 'expected "first_token" or "first_answer"' }).optional(),
    /** Goodput: the share of a request's per-token gaps that must be within `itl` for the request to count (default 0.99). */
      itl_percentile: z.number({ error: 'expected a ratio above 0 and at most 1, e.g. 0.99' }).gt(0, { error: 'expected a ratio above 0 and at most 1, e.g. 0.99' }).lte(1, { error: 'expected a ratio above 0 and at most 1, e.g. 0.99' }).optional(),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? 'expected a mapping such as { objective: 0.99, ttft: 200ms }' : undefined) },
  )
  .superRefine((slo, ctx) => {
    if (slo.ttft === undefined && slo.itl === undefined && slo.e2e === undefined) {
      ctx.addIssue({ code: 'custom', message: 'expected at least one threshold: ttft, itl or e2e' });
    }
  });

const workload = z.strictObject({
  name: workloadName,
  match: workloadMatch.optional(),
  slo: sloObjectives.optional(),
  /** false: keep no workload-shape record for this workload (docs/workload-profiles.md). */
  profile: z.boolean({ error: 'expected true or false' }).optional(),
});

const workloadList = z
  .array(workload)
  .min(1, { error: 'expected at least one workload' })
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((w, i) => {
      if (seen.has(w.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate workload name "${w.name}"` });
      seen.add(w.name);
      if (w.match === undefined && i < list.length - 1) {
        ctx.addIssue({ code: 'custom', path: [i], message: `workload "${w.name}" has no match rules, so it takes every request and the workloads after it are never used; put it last` });
      }
    });
    for (const { index, alternative, earlier } of shadowedAlternatives(list)) {
      const w = list[index] as WorkloadConfigEntry;
      const first = list[earlier] as WorkloadConfigEntry;
      ctx.addIssue({
        code: 'custom',
        path: alternative === undefined ? [index, 'match'] : [index, 'match', alternative],
        message: `never decides: workload "${first.name}" (workloads[${earlier}]) comes first and takes every request this matches; put "${w.name}" before "${first.name}", or narrow "${first.name}"`,
      });
    }
  });

type WorkloadConfigEntry = z.infer<typeof workload>;

/**
 * The match alternatives no request can ever reach, because a workload before theirs holds a
 * subset of their conditions (first match wins): `path: /v1/*` before `path: /v1/chat/completions`,
 * `x-workload: chat` before `x-workload: chat` plus `x-tier: fast`. Only containment is reported,
 * never an overlap: two workloads that share some requests are what order is for. A catch-all
 * before the end has its own message.
 */
function shadowedAlternatives(list: readonly WorkloadConfigEntry[]): { index: number; alternative: number | undefined; earlier: number }[] {
  const alternatives = list.map((w) => (w.match === undefined ? [] : Array.isArray(w.match) ? w.match : [w.match]));
  const found: { index: number; alternative: number | undefined; earlier: number }[] = [];
  alternatives.forEach((own, index) => {
    own.forEach((conditions, k) => {
      const earlier = alternatives.slice(0, index).findIndex((before) => before.some((broader) => takesEvery(broader, conditions)));
      if (earlier !== -1) found.push({ index, alternative: Array.isArray(list[index]?.match) ? k : undefined, earlier });
    });
  });
  return found;
}

/** True when every request `narrower` matches is matched by `broader` too. */
function takesEvery(broader: MatchConditionsConfig, narrower: MatchConditionsConfig): boolean {
  if (broader.model !== undefined && broader.model !== narrower.model) return false;
  if (broader.path !== undefined) {
    if (narrower.path === undefined) return false;
    if (broader.path.endsWith('*') ? !narrower.path.startsWith(broader.path.slice(0, -1)) : broader.path !== narrower.path) return false;
  }
  const headers = new Map(Object.entries(narrower.header ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
  return Object.entries(broader.header ?? {}).every(([name, value]) => headers.get(name.toLowerCase()) === value);
}

/** The node-local DCGM exporter's /metrics, e.g. http://$(NODE_IP):9400/metrics (src/dcgm/). */
const dcgmUrl = z.string().superRefine((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `expected the DCGM exporter's metrics URL such as http://10.0.0.7:9400/metrics, got "${redactUrl(value)}"` });
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got "${url.protocol}"` });
  }
});

const dcgmSettings = z
  .strictObject({
    /** Where to scrape; the sidecar reads the exporter only when this is set. */
    url: dcgmUrl,
    /** Time between the end of one scrape and the start of the next (default 15s). */
    interval: timerDuration.optional(),
    /** A scrape that has not finished by then counts as failed (default 5s or the interval if shorter; at most the interval). */
    timeout: timerDuration.optional(),
  })
  .superRefine((dcgm, ctx) => {
    if (dcgm.timeout === undefined) return;
    const interval = parseDurationMs(dcgm.interval ?? '15s');
    const timeout = parseDurationMs(dcgm.timeout);
    if (interval !== undefined && timeout !== undefined && timeout > interval) {
      ctx.addIssue({ code: 'custom', path: ['timeout'], message: `must not exceed the interval (${dcgm.interval ?? '15s'})` });
    }
  });

/**
 * What the pod's accelerators cost (docs/capacity-and-cost.md): the price of one accelerator for one
 * hour and how many the pod holds, a whole number or `dcgm` (the GPUs and MIG instances the DCGM
 * exporter reports for this pod, src/dcgm/). With it, each request's share of the pod's time is
 * exported as accelerator-seconds and `tokentap render` adds the cost recording rules.
 */
const ACCELERATORS_EXPECTED = 'expected the number of accelerators of the pod, a whole number from 1 to 1024, or "dcgm" to read it from the DCGM exporter';

const accelerators = z.number().int({ error: ACCELERATORS_EXPECTED }).min(1, { error: ACCELERATORS_EXPECTED }).max(1024, { error: ACCELERATORS_EXPECTED });

const costSettings = z.strictObject({
  accelerator_price_per_hour: z
    .number({
      error: (issue) =>
        issue.input === undefined ? 'required: the price of one accelerator for one hour, e.g. 2.5' : 'expected the price of one accelerator for one hour, a number such as 2.5',
    })
    .positive({ error: 'expected a price above 0, e.g. 2.5' })
    .max(1e6, { error: 'expected a price per accelerator-hour of at most 1000000' }),
  accelerators: z
    .union([accelerators, z.literal('dcgm')], { error: ACCELERATORS_EXPECTED })
    .optional(),
  currency: z
    .string({ error: 'expected a currency code such as USD or EUR' })
    .regex(/^[A-Z]{3}$/, { error: 'expected a currency code of three capital letters (ISO 4217) such as USD or EUR' })
    .optional(),
});

/**
 * Which protocol a path speaks, for servers mounted under other paths than the built-in defaults
 * (src/taps/route-table.ts); tried in order before the defaults, first match wins.
 */
const route = z.strictObject({
  /** Exact, a prefix when it ends in "*", or "*" as one whole segment in the middle. */
  path: z.string({ error: 'expected a path such as /llm/v1/chat/completions' }).superRefine((value, ctx) => {
    const problem = pathPatternProblem(value);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `${problem}, got "${value}"` });
  }),
  protocol: z.enum(PROTOCOLS, { error: `expected one of ${PROTOCOLS.join(', ')}` }),
  /** Only requests with this method; any method when absent. */
  method: z
    .string()
    .regex(/^[A-Za-z]+$/, { error: 'expected an HTTP method such as POST' })
    .optional(),
});

/**
 * An absolute http(s) URL for alert annotations: alerts are read in PagerDuty, Slack and e-mail,
 * where a relative link leads nowhere.
 */
function absoluteUrl(example: string) {
  return z.string().superRefine((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: `expected an absolute http:// or https:// URL such as ${example}, got "${value}" (alerts are read in PagerDuty, Slack and e-mail, where a relative link leads nowhere)` });
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got "${url.protocol}"` });
    }
    if (url.search || url.hash) ctx.addIssue({ code: 'custom', message: 'must not carry a query string or fragment (tokentap appends the path and the query)' });
    if (url.username || url.password) {
      ctx.addIssue({ code: 'custom', message: 'must not carry a user name or password: the link is copied into every alert and dashboard panel, read in PagerDuty, Slack and e-mail; let the server ask for the login' });
    }
    if (holdsTemplate(value)) ctx.addIssue({ code: 'custom', message: TEMPLATE_REFUSAL });
  });
}

/**
 * Alert annotations and labels are Prometheus templates: a `{{ ... }}` in a value tokentap puts there
 * would be expanded per alert (or fail the rule file), and a label changing per evaluation would
 * change the alert's identity.
 */
function holdsTemplate(value: string): boolean {
  return value.includes('{{') || value.includes('}}');
}

const TEMPLATE_REFUSAL = 'must not hold "{{" or "}}": Prometheus expands alert labels and annotations as templates';

/** A Prometheus label value used as an alert's severity ("critical", "warning", "P1"). */
const severityName = z
  .string({ error: 'expected a severity label value such as "critical"' })
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, { error: 'expected a severity label value of letters, digits, "_", "." or "-", such as "critical"' });

/** The labels tokentap's alerts set themselves; an extra static label may not replace one. */
const RESERVED_ALERT_LABELS = ['alertname', 'severity', 'namespace', 'workload', 'slo'];

/** Extra static labels on every alert (team, service, ...): Prometheus label names, string values. */
const extraAlertLabels = z
  .record(z.string(), z.string({ error: 'expected the label value as a string (quote numbers and booleans)' }))
  .superRefine((labels, ctx) => {
    for (const name of Object.keys(labels)) {
      if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name) || name.startsWith('__')) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'expected a Prometheus label name (letters, digits and "_", not starting with a digit or "__")' });
      } else if (RESERVED_ALERT_LABELS.includes(name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: `tokentap sets this label itself (${RESERVED_ALERT_LABELS.join(', ')}); choose another name` });
      } else if (holdsTemplate(labels[name] as string)) {
        ctx.addIssue({ code: 'custom', path: [name], message: TEMPLATE_REFUSAL });
      } else {
        // YAML's "\ud800" escape gives half a character, which a rule file cannot carry: the YAML
        // writer escapes it back and Prometheus refuses the file ("invalid Unicode character escape code").
        const half = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.exec(labels[name] as string)?.[0];
        if (half !== undefined) {
          ctx.addIssue({ code: 'custom', path: [name], message: `expected text of whole Unicode characters: "\\u${half.charCodeAt(0).toString(16)}" is half of one (a lone surrogate), which no rule file can hold` });
        }
      }
    }
  });

/** One PromQL label matcher, `name="value"`, `name!="value"`, `name=~"regex"` or `name!~"regex"`. */
const PROMQL_MATCHER = String.raw`\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\n]|\\.)*"\s*`;

/** The label matchers (what goes between the braces) that pick the sidecars' own scrape targets out of `up`. */
const scrapeSelector = z
  .string({ error: 'expected PromQL label matchers as a string, e.g. \'job=~"(.+/)?tokentap", endpoint=~"metrics|"\'' })
  .regex(new RegExp(`^${PROMQL_MATCHER}(?:,${PROMQL_MATCHER})*$`), {
    error: 'expected PromQL label matchers without braces, e.g. \'job=~"(.+/)?tokentap", endpoint=~"metrics|"\' (name, one of = != =~ !~, a double-quoted value; comma-separated)',
  })
  .superRefine((value, ctx) => {
    for (const message of matcherProblems(value)) ctx.addIssue({ code: 'custom', message });
  });

/** A Kubernetes namespace name (RFC 1123 label). */
const namespaceName = z
  .string({ error: 'expected a Kubernetes namespace name' })
  .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { error: 'expected a Kubernetes namespace name: lower-case letters, digits and "-", at most 63' });

/** How `tokentap render` writes the alerting rules (src/render/); the sidecar itself ignores it. */
const alertSettings = z.strictObject({
  /**
   * The Grafana that shows the tokentap dashboards, e.g. https://grafana.example.com: every alert
   * links to its SLO dashboard there. Required by `tokentap render` (src/render/alert-links.ts).
   */
  grafana_url: absoluteUrl('https://grafana.example.com').optional(),
  /**
   * Where docs/runbooks of this repository are browsable; each alert links to `<runbook_base_url>/<runbook>.md`.
   * Required by `tokentap render`, like grafana_url (src/render/alert-links.ts).
   */
  runbook_base_url: absoluteUrl('https://github.com/ORG/tokentap/blob/main/docs/runbooks').optional(),
  /** The `severity` label values of the two alert levels: pages wake someone up, tickets wait for working hours. */
  severity_names: z
    .strictObject({ page: severityName.optional(), ticket: severityName.optional() })
    .superRefine((names, ctx) => {
      // The defaults of config/load.ts: one name for both levels would make every ticket inhibit itself.
      if ((names.page ?? 'critical') === (names.ticket ?? 'warning')) ctx.addIssue({ code: 'custom', message: 'page and ticket need different severity names (the Alertmanager inhibition tells them apart by it)' });
    })
    .optional(),
  /** Static labels added to every alert (routing keys such as team or service). */
  labels: extraAlertLabels.optional(),
  /** How long a workload's P99 TTFT must stay above its threshold before TokentapTTFTP99OverBudget fires. */
  p99_ttft_for: duration.optional(),
  /** Level of TokentapTTFTP99OverBudget, or `off` for no such alert. */
  p99_ttft_severity: z.enum(['page', 'ticket', 'off'], { error: 'expected "ticket", "page" or "off" (the level; severity_names maps it to the label value)' }).optional(),
  /** TokentapTTFTP99OverBudget needs at least this many requests in its 5-minute window: a P99 of fewer samples is their maximum. */
  p99_ttft_min_requests: z.number({ error: 'expected a number of requests, e.g. 100' }).int({ error: 'expected a whole number of requests' }).nonnegative({ error: 'expected a number of requests, 0 or more' }).optional(),
  /**
   * Traffic guard: a workload's alerts stay silent while it served fewer requests per hour than this,
   * averaged over the alert's long window, so one slow request on a quiet workload pages nobody.
   */
  min_requests_per_hour: z.number({ error: 'expected a number of requests per hour, e.g. 60' }).nonnegative({ error: 'expected a number of requests per hour, 0 or more' }).finite().optional(),
  /** ITL burn-rate alerts: requests with a slow token their long window must hold (default 3; 0 turns the guard off). */
  itl_min_slow_requests: z
    .number({ error: 'expected a whole number of requests, e.g. 3' })
    .int({ error: 'expected a whole number of requests, e.g. 3' })
    .nonnegative({ error: 'expected a whole number of requests, 0 or more' })
    .optional(),
  /** How long a sidecar target must be down, or a namespace's sidecar metrics absent, before TokentapTargetDown or TokentapMetricsAbsent fires. */
  absent_for: duration.optional(),
  /** The label matchers of the sidecars' scrape targets in `up` (TokentapTargetDown). */
  scrape_selector: scrapeSelector.optional(),
  /** Namespaces that must have scraped sidecar metrics: TokentapMetricsAbsent fires for each that has none. */
  expected_namespaces: z
    .array(namespaceName, { error: 'expected a list of namespace names, e.g. [prod, staging]' })
    .superRefine((names, ctx) => {
      names.forEach((name, i) => {
        if (names.indexOf(name) !== i) ctx.addIssue({ code: 'custom', path: [i], message: `duplicate namespace "${name}"` });
      });
    })
    .optional(),
});

/** `metrics.native`: a native histogram's resolution, by schema or by bucket factor, and its bucket limit. */
const nativeSettings = z
  .strictObject({
    /** -4..8: each bucket boundary is the previous one times 2^(2^-schema). Default 3. */
    schema: z.number({ error: 'expected an integer from -4 to 8' }).int({ error: 'expected an integer from -4 to 8' }).min(-4, { error: 'expected an integer from -4 to 8' }).max(8, { error: 'expected an integer from -4 to 8' }).optional(),
    /** Alternative to `schema`: the largest growth factor from one boundary to the next, e.g. 1.1 (gives schema 3). */
    bucket_factor: z.number({ error: 'expected a number above 1, e.g. 1.1' }).gt(1, { error: 'expected a number above 1, e.g. 1.1' }).finite().optional(),
    /** Populated buckets per histogram series before the resolution is reduced. Default 160. */
    max_buckets: z
      .number({ error: 'expected a whole number of buckets from 1 to 100000' })
      .int({ error: 'expected a whole number of buckets from 1 to 100000' })
      .min(1, { error: 'expected a whole number of buckets from 1 to 100000' })
      .max(100_000, { error: 'expected a whole number of buckets from 1 to 100000' })
      .optional(),
    /** Observations within [-t, t] count in the zero bucket. Default 2^-128. */
    zero_threshold: z.number({ error: 'expected a number of seconds (or tokens), 0 or more' }).nonnegative({ error: 'expected a number of seconds (or tokens), 0 or more' }).finite().optional(),
    /** How far the zero bucket may widen to stay within max_buckets before the schema drops. Default: zero_threshold (never). */
    max_zero_threshold: z.number({ error: 'expected a number of seconds (or tokens), 0 or more' }).nonnegative({ error: 'expected a number of seconds (or tokens), 0 or more' }).finite().optional(),
  })
  .superRefine((native, ctx) => {
    if (native.schema !== undefined && native.bucket_factor !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['bucket_factor'], message: 'give either schema or bucket_factor, not both' });
    }
    if (native.max_zero_threshold !== undefined && native.max_zero_threshold < (native.zero_threshold ?? 2 ** -128)) {
      ctx.addIssue({ code: 'custom', path: ['max_zero_threshold'], message: 'must not be below zero_threshold' });
    }
  });

/**
 * Asking the upstream which models it serves (src/discovery/model-discovery.ts), so that only those
 * names become `gen_ai.request.model` label values.
 */
const modelDiscoverySettings = z.strictObject({
  /** Off: labels keep the first metrics.max_models names seen, as before discovery existed. */
  enabled: z.boolean({ error: 'expected true or false' }).optional(),
  /** Listing endpoints tried in order (default /v1/models, /api/tags, /info). */
  paths: z
    .array(z.string().startsWith('/', { error: 'expected a path starting with "/"' }), { error: 'expected a list of paths such as [/v1/models]' })
    .min(1, { error: 'expected at least one path (or enabled: false)' })
    .optional(),
  /** Time between discoveries (default 5m). */
  interval: timerDuration.optional(),
  /** Each listing request is abandoned after this long (default 2s). */
  timeout: timerDuration.optional(),
  /** A request to a LoRA adapter idle for longer than this counts as a cold start (default 5m). */
  adapter_idle_after: duration.optional(),
});

/** A count or size limit: a whole number of at least 1. */
const limitCount = z.number({ error: 'expected a whole number of at least 1' }).int({ error: 'expected a whole number of at least 1' }).min(1, { error: 'expected a whole number of at least 1' });

/** Every resource the relay holds for a client, bounded (docs/limits.md has the table and defaults). */
const limitSettings = z.strictObject({
  /** Client connections open at once; beyond it new connections are closed at once. Default: from the file-descriptor limit. */
  max_connections: limitCount.optional(),
  /** Client connections open at once from one address (default: max_connections; at the limit, connections are shared between addresses). */
  max_connections_per_client: limitCount.optional(),
  /** Time a request head may take to arrive (default 60s). */
  request_head_timeout: timerDuration.optional(),
  /** Silence from the client in the middle of a request body before it is cut with 408 (default 60s). */
  request_body_idle_timeout: timerDuration.optional(),
  /** Time a client may take no byte of its response that tokentap holds for it before the response is cut (default 60s). */
  response_send_timeout: timerDuration.optional(),
  /** Bytes of one JSON request body held to read its `model` (default 1 MiB). */
  sniffed_body_bytes: limitCount.optional(),
  /** Bytes of one request body held by `inject_usage` to rewrite it (default 8 MiB). */
  rewritten_body_bytes: limitCount.optional(),
  /** Bytes of request bodies held across all requests at once (sniffing and inject_usage; default 64 MiB). */
  held_body_bytes: limitCount.optional(),
  /** Requests queued on one connection behind the one being answered (default 16). */
  pipelined_requests: limitCount.optional(),
  /** Past 1,024 chunks, the average chunk size a chunked request body must keep, else it is cut with 400 (default 64). */
  min_request_chunk_bytes: limitCount.optional(),
  /** Interim (1xx) responses relayed per request (default 8). */
  interim_responses: limitCount.optional(),
  /** Bytes of interim (1xx) response heads relayed per request (default 64 KiB). */
  interim_response_bytes: limitCount.optional(),
  /** Bytes of log lines waiting for stdout before further lines are dropped (default 16 MiB). */
  log_buffer_bytes: limitCount.optional(),
  /** HTTP/2: streams one client session may have open at once (default 128). */
  h2_max_concurrent_streams: limitCount.optional(),
  /** HTTP/2: bytes of one request's decoded header list (default 32 KiB). */
  h2_max_header_list_bytes: limitCount.optional(),
  /** HTTP/2: each stream's flow-control window, 65,535 to 2^31-1 bytes (default 65,535). */
  h2_stream_window_bytes: z.number({ error: 'expected a number of bytes from 65535 to 2147483647' }).int().min(65_535).max(2 ** 31 - 1).optional(),
  /** HTTP/2: streams a client may reset before their answer is complete, per session and second (default 100). */
  h2_client_resets_per_second: limitCount.optional(),
});

/** The workload-shape record and its exports (docs/workload-profiles.md). */
const profileSettings = z.strictObject({
  /** false: no workload keeps a record, and /profile answers 404. */
  enabled: z.boolean({ error: 'expected true or false' }).optional(),
  /** Finished requests each workload's record holds before the oldest are dropped (default 10000). */
  max_requests_per_workload: limitCount.max(1_000_000, { error: 'expected at most 1000000 requests' }).optional(),
  /** Tokens per fingerprint block and Mooncake hash id (default 512, the Mooncake traces' and GuideLLM's). */
  block_tokens: z
    .number({ error: 'expected a whole number of tokens from 16 to 65536, e.g. 512' })
    .int({ error: 'expected a whole number of tokens from 16 to 65536, e.g. 512' })
    .min(16, { error: 'expected at least 16 tokens (the smallest block replay tools use: vLLM timed_trace, Bailian traces)' })
    .max(65_536, { error: 'expected at most 65536 tokens' })
    .optional(),
});

/**
 * Capacity at SLO (docs/capacity-and-cost.md): how many samples make an in-flight band count, the
 * window the fleet's recording rules read, the operator's planned peak and the headroom ticket.
 */
const capacitySettings = z.strictObject({
  /** Requests with a first token an in-flight band needs before its SLO verdict counts (default 100). */
  min_samples_per_band: z.number({ error: 'expected a whole number of requests, e.g. 100' }).int({ error: 'expected a whole number of requests, e.g. 100' }).min(1, { error: 'expected a whole number of requests, at least 1' }).optional(),
  /** The window the fleet's capacity rules read the in-flight bands over (default 168h, a week). */
  window: duration.optional(),
  /** The window of the observed peak, in flight and requests per second (default 24h: one daily cycle). */
  peak_window: duration.optional(),
  /** The peak the operator plans for, requests per second across the fleet: pods needed is also given for it. */
  planned_peak_rps: z.number({ error: 'expected requests per second, e.g. 250' }).positive({ error: 'expected requests per second above 0, e.g. 250' }).finite({ error: 'expected a finite number of requests per second' }).optional(),
  /** TokentapCapacityHeadroomLow opens a ticket when the headroom falls below this share of capacity (default 0.2). */
  headroom_ticket_ratio: z.number({ error: 'expected a ratio between 0 and 1, e.g. 0.2' }).gt(0, { error: 'expected a ratio above 0 and below 1, e.g. 0.2' }).lt(1, { error: 'expected a ratio above 0 and below 1, e.g. 0.2' }).optional(),
});

export const configFileSchema = z.strictObject({
  upstream: upstreamUrl.optional(),
  listen: listenAddress.optional(),
  admin_listen: listenAddress.optional(),
  /** Names besides IP addresses, localhost and private names the admin listener answers to (an Ingress host; `.example.com` for every name under it). */
  admin_allowed_hosts: z
    .array(z.string().regex(/^\.?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i, { error: 'expected a host name without port, such as tokentap.example.com, or .example.com for every name under it' }), {
      error: 'expected a list of host names, such as [tokentap.example.com]',
    })
    .optional(),
  /** Seconds of silence from the upstream (before headers or between chunks) before the request is cut as `timeout`. */
  upstream_idle_timeout: timerDuration.optional(),
  /** What the upstream speaks: `http1` (default; HTTP/2 clients' streams forwarded as HTTP/1.1 requests) or `h2c` (forwarded as HTTP/2 streams, prior knowledge). */
  upstream_protocol: z.enum(['http1', 'h2c'], { error: 'expected http1 or h2c' }).optional(),
  /** Bytes of a request held to retry it on a fresh connection when a reused one closes before answering; 0 disables retries. */
  upstream_retry_body_limit: z.number({ error: 'expected a number of bytes, e.g. 65536 (0 disables retries)' }).int().min(0).max(16 * 1024 * 1024).optional(),
  /** Path the readiness check requests from the upstream (vLLM, TGI, llama.cpp: /health). */
  upstream_health_path: z.string().startsWith('/', { error: 'expected a path starting with "/"' }).optional(),
  /** After SIGTERM, how long in-flight requests may run before they are cut (outcome `shutdown`). */
  drain_timeout: timerDuration.optional(),
  /** After the drain, how long /metrics waits for a scrape to read the final counts before the process exits; absent, it does not wait. */
  final_scrape_wait: timerDuration.optional(),
  /** Workloads in match order; see workloadMatch. Without it every request is workload "default". */
  workloads: workloadList.optional(),
  /** Path-to-protocol routes tried before the built-in ones; see `route`. */
  routes: z.array(route, { error: 'expected a list of routes like { path: /llm/v1/chat/completions, protocol: openai-chat }' }).optional(),
  /**
   * Ask OpenAI-style streaming chat and completions requests for usage (`stream_options.include_usage`)
   * when they do not, and strip the usage-only chunk from the response for them. Off by default:
   * it rewrites request bodies (src/proxy/usage-injection.ts).
   */
  inject_usage: z.boolean({ error: 'expected true or false' }).optional(),
  /** Read GPU memory and utilisation of this pod from the node's DCGM exporter. */
  dcgm: dcgmSettings.optional(),
  /** The price of the pod's accelerators, for cost per request (docs/capacity-and-cost.md). */
  cost: costSettings.optional(),
  /** Learn the served model names from the upstream; see modelDiscoverySettings. */
  model_discovery: modelDiscoverySettings.optional(),
  /** Alerting rules rendered by `tokentap render`. */
  alerts: alertSettings.optional(),
  /** Bounds on what the relay holds per client and in total (docs/limits.md). */
  limits: limitSettings.optional(),
  profiles: profileSettings.optional(),
  /** Capacity at SLO and pods needed (docs/capacity-and-cost.md). */
  capacity: capacitySettings.optional(),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
  metrics: z
    .strictObject({
      /** Distinct model label values before further models are folded into `other`. */
      max_models: z.number().int().min(1).max(1000).optional(),
      /**
       * What histograms the protobuf exposition carries (docs/native-histograms.md): classic buckets,
       * Prometheus native histograms, or both in one message (default). The text format is the same in every case.
       */
      histograms: z.enum(['classic', 'native', 'both'], { error: 'expected "classic", "native" or "both"' }).optional(),
      /** Resolution and bucket limit of the native histograms (src/metrics/native-buckets.ts). */
      native: nativeSettings.optional(),
      /**
       * How histograms are pushed over OTLP: `exponential` (the OTel SDK's base-2 exponential
       * aggregation, the OTLP counterpart of native histograms) or `explicit` (the classic buckets).
       * Default: exponential unless `histograms` is classic.
       */
      otlp_histograms: z.enum(['explicit', 'exponential'], { error: 'expected "explicit" or "exponential"' }).optional(),
      buckets: z
        .strictObject({
          ttfb: bucketList.optional(),
          ttft: bucketList.optional(),
          itl: bucketList.optional(),
          tpot: bucketList.optional(),
          e2e: bucketList.optional(),
          tokens: bucketList.optional(),
        })
        .optional(),
    })
    .optional(),
}).superRefine((config, ctx) => {
  // The count comes from the exporter only when there is one to read.
  if (config.cost?.accelerators === 'dcgm' && config.dcgm === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['cost', 'accelerators'],
      message: '"dcgm" reads the GPU count from the DCGM exporter, but none is configured: set dcgm.url (or TOKENTAP_DCGM_URL), or give the count as a number',
    });
  }
});

export type ConfigFile = z.infer<typeof configFileSchema>;
export type WorkloadConfig = z.infer<typeof workload>;

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** "0.0.0.0:8080", "[::1]:8080", ":8080" (all interfaces). */
export function parseListenAddress(text: string): ListenAddress | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port > 65535) return undefined;
  const host = match[1] ?? match[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}
