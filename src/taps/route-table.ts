// Which protocol a request speaks, from its method and path: the configured routes first, in
// order, then the built-in defaults for the paths servers use out of the box. Compiled once at
// start-up; a lookup is a short scan of precompiled matchers, once per request.
//
// Path patterns (line comments here: the patterns hold the characters that close a block comment):
// exact (`/v1/chat/completions`); a prefix when the pattern ends in `*` (`/llm/*`); and a `*`
// standing for one whole segment in the middle (`/v2/models/*/generate_stream`). The query string is
// never part of the path.

/** The protocols a route can name; `none` opts a path out of observation (TTFB and e2e only). */
export const PROTOCOLS = [
  'openai-chat',
  'openai-completions',
  'openai-responses',
  'anthropic-messages',
  'tgi',
  'ollama',
  'llamacpp',
  'triton',
  'none',
] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export interface Route {
  readonly path: string;
  readonly protocol: Protocol;
  /** Only this HTTP method (upper case); any method when absent. */
  readonly method?: string | undefined;
}

/** Where each protocol lives on the servers that speak it, unconfigured. */
const BUILTIN_ROUTES: readonly Route[] = [
  { method: 'POST', path: '/v1/chat/completions', protocol: 'openai-chat' },
  { method: 'POST', path: '/chat/completions', protocol: 'openai-chat' },
  { method: 'POST', path: '/v1/completions', protocol: 'openai-completions' },
  { method: 'POST', path: '/v1/responses', protocol: 'openai-responses' },
  { method: 'POST', path: '/v1/messages', protocol: 'anthropic-messages' },
  { method: 'POST', path: '/generate_stream', protocol: 'tgi' },
  // llama.cpp also answers /api/chat, in OpenAI's SSE format: the content type tells them apart.
  { method: 'POST', path: '/api/chat', protocol: 'ollama' },
  { method: 'POST', path: '/api/generate', protocol: 'ollama' },
  // llama.cpp's native endpoint; its `/completions` alias is left out (other servers use that path
  // for OpenAI completions): add a route for it.
  { method: 'POST', path: '/completion', protocol: 'llamacpp' },
  { method: 'POST', path: '/v2/models/*/generate_stream', protocol: 'triton' },
  { method: 'POST', path: '/v2/models/*/versions/*/generate_stream', protocol: 'triton' },
];

// Why a path pattern is invalid, or undefined when it is fine; for the config schema.
export function pathPatternProblem(pattern: string): string | undefined {
  if (!pattern.startsWith('/')) return 'expected a path starting with "/"';
  const segments = pattern.split('/');
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as string;
    const last = i === segments.length - 1;
    if (segment.includes('*') && !(segment === '*' || (last && segment.indexOf('*') === segment.length - 1))) {
      return 'a "*" must be a whole segment ("/v2/models/*/generate_stream") or end the path ("/llm/*")';
    }
  }
  if (pattern.includes('?')) return 'a route matches the path only, without a query string';
  return undefined;
}

type Matcher = (path: string) => boolean;

interface CompiledRoute {
  readonly method: string | undefined;
  readonly matches: Matcher;
  readonly protocol: Protocol;
}

export class RouteTable {
  private readonly routes: readonly CompiledRoute[];

  /** `configured` must have passed pathPatternProblem (the config schema checks it). */
  constructor(configured: readonly Route[]) {
    this.routes = [...configured, ...BUILTIN_ROUTES].map((route) => ({
      method: route.method?.toUpperCase(),
      matches: compile(route.path),
      protocol: route.protocol,
    }));
  }

  /** The protocol of the first route matching; undefined when none does. `path` excludes the query. */
  protocolFor(method: string, path: string): Protocol | undefined {
    for (const route of this.routes) {
      if ((route.method === undefined || route.method === method) && route.matches(path)) return route.protocol;
    }
    return undefined;
  }
}

function compile(pattern: string): Matcher {
  const prefix = pattern.endsWith('*') ? pattern.slice(0, -1) : undefined;
  const body = prefix ?? pattern;
  if (!body.includes('*')) {
    return prefix === undefined ? (path) => path === pattern : (path) => path.startsWith(prefix);
  }
  // Whole-segment wildcards in the middle: compare segment by segment.
  const segments = body.split('/');
  return (path) => {
    const parts = path.split('/');
    if (prefix === undefined ? parts.length !== segments.length : parts.length < segments.length) return false;
    for (let i = 0; i < segments.length; i++) {
      const segment = segments[i] as string;
      const part = parts[i] as string;
      if (segment === '*') {
        if (part.length === 0) return false;
      } else if (i === segments.length - 1 && prefix !== undefined) {
        if (!part.startsWith(segment)) return false;
      } else if (segment !== part) {
        return false;
      }
    }
    return true;
  };
}
