/**
 * An operator URL as tokentap may log or echo it: userinfo and query replaced by `***`, fragment
 * dropped (`http://u:p@host:8000/x?key=1` becomes `http://***@host:8000/x?***`). Upstream, OTLP and
 * DCGM URLs can carry credentials (basic auth, API keys in the query), and start-up logs and
 * configuration errors end up in log stores that many people read. Also takes text that is not a
 * valid URL (a configuration error quotes what was given), masking what looks like either part.
 */
export function redactUrl(url: URL | string): string {
  let parsed: URL | undefined;
  if (typeof url !== 'string') parsed = url;
  // Only scheme://authority text is read as a URL: `collector:4317` parses too, as scheme `collector:`.
  else if (/^[a-z][a-z0-9+.-]*:\/\/[^/]/i.test(url) && URL.canParse(url)) parsed = new URL(url);
  if (parsed === undefined) {
    return (url as string).replace(/^([^/?#]*\/\/)[^/?#]*@/, '$1***@').replace(/\?[^#]*/, '?***').replace(/#.*$/, '');
  }
  const userinfo = parsed.username !== '' || parsed.password !== '' ? '***@' : '';
  const query = parsed.search !== '' ? '?***' : '';
  return `${parsed.protocol}//${userinfo}${parsed.host}${parsed.pathname}${query}`;
}
