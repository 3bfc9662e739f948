/**
 * Which exposition format a scrape gets, from its Accept header (RFC 9110 section 12.5.1: media
 * ranges with parameters and a q weight, 1 when absent, 0 meaning "not acceptable").
 *
 * tokentap serves two formats: the text format 0.0.4, and the protobuf format
 * (`application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited`),
 * which Prometheus asks for first once native histograms are on (`--enable-feature=native-histograms`
 * on 2.40..2.x, `scrape_native_histograms` / `scrape_protocols` on 3.x). Protobuf is served when the
 * scraper lists it, for that message and delimited encoding, with a weight at least that of every
 * text range it lists (`text/plain`, `text/*`, `* /*`). OpenMetrics text is not served by tokentap,
 * so its weight does not count against protobuf. No Accept header at all: text, as before.
 */

const PROTOBUF_TYPE = 'application/vnd.google.protobuf';
const METRIC_FAMILY = 'io.prometheus.client.MetricFamily';

interface MediaRange {
  readonly type: string;
  readonly params: ReadonlyMap<string, string>;
  readonly q: number;
}

function parseRange(text: string): MediaRange | undefined {
  const [typePart, ...paramParts] = text.split(';');
  const type = (typePart ?? '').trim().toLowerCase();
  if (type === '') return undefined;
  const params = new Map<string, string>();
  for (const part of paramParts) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    params.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1'));
  }
  const qText = params.get('q');
  const q = qText === undefined ? 1 : Number(qText);
  return { type, params, q: Number.isFinite(q) ? q : 0 };
}

export function wantsProtobuf(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  let protobufQ = 0;
  let textQ = 0;
  for (const range of accept.split(',').map(parseRange)) {
    if (range === undefined) continue;
    if (range.type === PROTOBUF_TYPE) {
      if (range.params.get('proto') === METRIC_FAMILY && range.params.get('encoding') === 'delimited') protobufQ = Math.max(protobufQ, range.q);
    } else if (range.type === 'text/plain' || range.type === 'text/*' || range.type === '*/*') {
      textQ = Math.max(textQ, range.q);
    }
  }
  return protobufQ > 0 && protobufQ >= textQ;
}
