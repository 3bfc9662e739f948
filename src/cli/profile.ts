import { parseArgs } from 'node:util';
import { DEFAULT_PROFILE_WINDOW, OMITTED_ROWS_HEADER, PROFILE_FORMATS } from '../admin/profile-routes.js';
import { WORKLOAD_NAME } from '../config/schema.js';
import { TokentapError } from '../errors.js';
import { readBounded } from './bounded-answer.js';
import type { CliIO } from './main.js';
import { terminalText } from './terminal-text.js';

export const PROFILE_USAGE = `Usage: tokentap profile --admin URL [--workload NAME] [--format FORMAT] [--window DURATION]

Reads a running sidecar's workload-shape record from its admin listener and prints it
(docs/workload-profiles.md):
  json       the fitted profile (every workload and the mix without --workload)
  guidellm   a GuideLLM scenario file: guidellm run --scenario FILE --backend ...   (needs --workload)
  aiperf     aiperf profile arguments (--isl ... --arrival-pattern gamma ...; a --seq-dist mixture without --workload)
  mooncake   a Mooncake trace, JSON Lines, for GuideLLM replay, AIPerf mooncake_trace, vllm bench timed_trace  (needs --workload)

Flags:
  --admin URL          the sidecar's admin listener, e.g. http://127.0.0.1:9464
  --workload NAME      one workload (default: all of them)
  --format FORMAT      ${PROFILE_FORMATS.join(', ')} (default json)
  --window DURATION    how far back, e.g. 10m, 90s, 2h (default ${DEFAULT_PROFILE_WINDOW}, at most 24h)
  --help               show this text
`;

/**
 * The largest answer read: a Mooncake trace holds at most 2,000,000 hash ids (under 20 MB) plus a
 * row per request of the record; past this the answer is not a profile export.
 */
const MAX_EXPORT_BYTES = 64 * 1024 * 1024;

/** How long the admin listener may take to answer: the profile is computed from memory, in milliseconds. */
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * `tokentap profile`: GET /profile[/<workload>]?format=...&window=... from the admin listener,
 * written to stdout as the sidecar sent it (control characters, which no tokentap answer holds, as
 * "?"). A refusal (no such workload, nothing in the window) is the sidecar's own message on
 * stderr, exit 1.
 */
export async function runProfile(argv: readonly string[], io: CliIO): Promise<number> {
  const flags = parseProfileFlags(argv);
  const url = profileUrl(flags);
  let response: Response;
  try {
    // An admin listener never redirects: another origin's answer is not printed as this one's.
    response = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    io.stderr.write(`tokentap profile: cannot reach the admin listener at ${url.origin} (${cause}); is the sidecar running, and is --admin its admin_listen address?\n`);
    return 1;
  }
  let body: string;
  try {
    body = await readBounded(response, MAX_EXPORT_BYTES);
  } catch (error) {
    io.stderr.write(terminalText(`tokentap profile: ${url.pathname}: ${(error as Error).message}: not a tokentap admin listener's profile, or ask a shorter --window\n`));
    return 1;
  }
  if (!response.ok) {
    io.stderr.write(terminalText(`tokentap profile: ${url.pathname}: HTTP ${response.status}: ${refusalMessage(body)}\n`));
    return 1;
  }
  // A tokentap answer (JSON, JSON Lines, command-line text) holds no control character but line
  // feeds, so this changes none; a hostile listener's escape sequences do not reach the terminal.
  const printed = terminalText(body);
  io.stdout.write(printed.endsWith('\n') ? printed : `${printed}\n`);
  const omitted = response.headers.get(OMITTED_ROWS_HEADER);
  if (omitted !== null) io.stderr.write(`tokentap profile: warning: ${terminalText(omitted)} requests left out of the trace, which holds at most 2,000,000 hash ids; ask a shorter --window\n`);
  return 0;
}

interface ProfileFlags {
  readonly admin: URL;
  readonly workload: string | undefined;
  readonly format: string;
  readonly window: string;
}

function parseProfileFlags(argv: readonly string[]): ProfileFlags {
  let values: { admin?: string; workload?: string; format?: string; window?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { admin: { type: 'string' }, workload: { type: 'string' }, format: { type: 'string' }, window: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }
  if (values.admin === undefined) throw new TokentapError('TOKENTAP_ERR_USAGE', ['profile needs --admin URL, the sidecar\'s admin listener (e.g. http://127.0.0.1:9464)']);
  let admin: URL;
  try {
    admin = new URL(values.admin);
  } catch {
    throw new TokentapError('TOKENTAP_ERR_USAGE', [`--admin ${JSON.stringify(values.admin)}: expected a URL such as http://127.0.0.1:9464`]);
  }
  if (admin.protocol !== 'http:' && admin.protocol !== 'https:') throw new TokentapError('TOKENTAP_ERR_USAGE', [`--admin ${values.admin}: expected an http:// or https:// URL`]);
  if (values.workload !== undefined && !WORKLOAD_NAME.test(values.workload)) throw new TokentapError('TOKENTAP_ERR_USAGE', [workloadNameProblem(values.workload)]);
  const format = values.format ?? 'json';
  if (!(PROFILE_FORMATS as readonly string[]).includes(format)) throw new TokentapError('TOKENTAP_ERR_USAGE', [`--format ${format}: expected one of ${PROFILE_FORMATS.join(', ')}`]);
  return { admin, workload: values.workload, format, window: values.window ?? DEFAULT_PROFILE_WINDOW };
}

/**
 * A --workload that no configuration can name. Checked here because it goes into the URL's path,
 * where ".." or "." (even as %2E) is a dot segment: `/profile/..` is `/`, the status page.
 */
export function workloadNameProblem(workload: string): string {
  return `--workload ${JSON.stringify(workload)}: expected a workload name as configured: lower-case letters, digits, "_" or "-", starting with a letter`;
}

function profileUrl(flags: ProfileFlags): URL {
  const base = flags.admin.pathname.endsWith('/') ? flags.admin.pathname : `${flags.admin.pathname}/`;
  const path = flags.workload === undefined ? 'profile' : `profile/${encodeURIComponent(flags.workload)}`;
  const url = new URL(`${base}${path}`, flags.admin);
  url.searchParams.set('format', flags.format);
  url.searchParams.set('window', flags.window);
  return url;
}

/** The `error` of the sidecar's JSON refusal, else the body as it came (cut short). */
function refusalMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // Not the sidecar's JSON: say what came.
  }
  return body.slice(0, 500);
}
