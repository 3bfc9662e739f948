import type { IncomingHttpHeaders } from 'node:http';
import { parseArgs } from 'node:util';
import { TokentapError } from '../errors.js';

/**
 * Simulator settings: one definition per setting (type, flag, header), read by the programmatic
 * API, the command line and the per-request headers, so the three can never disagree. Everything is
 * validated once at its boundary (STYLE.md habit 2): a bad option or flag stops start-up with every
 * problem listed; a bad header is answered with a 400 that names it.
 */

export type UsageMode = 'auto' | 'always' | 'never';

export interface SimulatorOptions {
  host?: string;
  port?: number;
  /**
   * A second listener on `host` speaking HTTP/2 cleartext with prior knowledge (h2c): the gRPC
   * services (grpc-services.ts) and every HTTP API; 0 picks a free port; unset, none.
   */
  h2cPort?: number;
  /** Delay from the request body received to the first content token. */
  ttftMs?: number;
  /** Delay between content chunks. */
  itlMs?: number;
  /** Uniform random ± jitter added to each delay (a delay never goes below 0). */
  jitterMs?: number;
  /** Tokens generated when the request sets no max_tokens; a smaller max_tokens caps it. */
  outputTokens?: number;
  /** Tokens joined into one delta per chunk, like vLLM with a stream interval or speculative decoding. */
  tokensPerChunk?: number;
  /** Send vLLM's role-only first chunk on chat streams. */
  rolePrelude?: boolean;
  /** auto: usage chunk iff the request asks (stream_options.include_usage); always: as vLLM's --enable-force-include-usage. */
  usage?: UsageMode;
  /** Served model name: listed by /v1/models and used when a request names none. */
  model?: string;
  /**
   * LoRA adapters listed by /v1/models as vLLM lists them, each `name` (on the served model) or
   * `name=base` (`parent` = base): lora-adapters.ts.
   */
  loras?: readonly string[];
  /** Added to the TTFT of a request to an adapter that is not loaded (vLLM loading its weights). */
  loraLoadMs?: number;
  /** An adapter with no request for this long is unloaded; the next request to it waits loraLoadMs. */
  loraUnloadAfterMs?: number;
  /**
   * Each content token's text is the time its chunk was written, as `process.hrtime.bigint()`
   * nanoseconds in decimal and a space, so a client can compute each chunk's delivery delay.
   */
  stamp?: boolean;
  /** Idle time before a keep-alive comment on protocols that send them (TGI's `:` lines). */
  keepAliveMs?: number;
  /**
   * As llama-server: a stream's response announces `Keep-Alive: timeout=5, max=100`, and the
   * connection is closed right after its last chunk anyway, without `Connection: close`
   * (test/fixtures/streams/llamacpp/chat-close-after-stream.wire.jsonl).
   */
  closeAfterStream?: boolean;
  /**
   * As uvicorn (vLLM): the chunked terminator `0\r\n\r\n` is written this long after the terminal
   * event, as a write of its own (0.1 ms in test/fixtures/streams/vllm/chat-two-streams-one-connection.wire.jsonl).
   * 0: together.
   */
  terminatorDelayMs?: number;
  /**
   * As vLLM's `--enable-per-request-metrics`: the final usage chunk of an OpenAI stream (and a
   * non-streamed body) carries `metrics` {time_to_first_token_ms, generation_time_ms,
   * queue_time_ms, mean_itl_ms, tokens_per_second}.
   */
  perRequestMetrics?: boolean;
  /** The queue time the engine reports (vLLM `queue_time_ms`); the wire timing stays `ttftMs`. */
  engineQueueMs?: number;
  /**
   * The prefill the engine reports (vLLM `time_to_first_token_ms`, llama.cpp `timings.prompt_ms`,
   * Ollama `prompt_eval_duration`), or `measured`: what the simulator itself took to its first token.
   */
  enginePrefillMs?: EngineDuration;
  /** The model load Ollama reports (`load_duration`), or `measured` (the time to open the response). */
  engineLoadMs?: EngineDuration;
  /**
   * A known knee for capacity tests (docs/capacity-and-cost.md): when more than this many requests
   * are in flight in the simulator (the new one included), the first token takes `pastKneeTtftMs`
   * instead of `ttftMs`. 0: no knee.
   */
  kneeInFlight?: number;
  /** The TTFT past the knee. */
  pastKneeTtftMs?: number;
}

/** A duration the simulated engine reports: fixed, or `measured` from its own clock. */
export type EngineDuration = number | 'measured';

/** How one generation behaves: the simulator's settings, overridable per request by `x-sim-*` headers. */
export interface Behaviour {
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly jitterMs: number;
  readonly outputTokens: number;
  readonly tokensPerChunk: number;
  readonly rolePrelude: boolean;
  readonly usage: UsageMode;
  readonly stamp: boolean;
  readonly keepAliveMs: number;
  readonly closeAfterStream: boolean;
  readonly terminatorDelayMs: number;
  readonly perRequestMetrics: boolean;
  readonly engineQueueMs: number;
  readonly enginePrefillMs: EngineDuration;
  readonly engineLoadMs: EngineDuration;
  readonly kneeInFlight: number;
  readonly pastKneeTtftMs: number;
}

/**
 * An injected failure. `status` answers at once. The others let `afterTokens` content tokens
 * through and strike when the next chunk would have been due (so a client has time to read what
 * came before): `reset` sends a TCP RST, `truncate` ends the response cleanly without a terminal
 * event, `stall` sends nothing more until the client leaves, `error` sends the protocol's in-stream
 * error event (Anthropic's `event: error`, vLLM's `data: {"error": ...}`; a 500 for a non-streaming
 * request) and ends the response. A count beyond the tokens the request generates never strikes.
 */
export type Fault =
  | { readonly kind: 'none' }
  | { readonly kind: 'status'; readonly status: number }
  | { readonly kind: 'reset' | 'truncate' | 'stall' | 'error'; readonly afterTokens: number };

/** The faults that strike mid-generation, after some tokens. */
export type InterruptFault = Extract<Fault, { afterTokens: number }>;

export interface RequestBehaviour extends Behaviour {
  readonly fault: Fault;
  /** Seeds the generated text; unset, the simulator uses its request counter. */
  readonly seed: number | undefined;
}

/** A LoRA adapter the simulator serves: its name and the base model its listing entry names as `parent`. */
export interface LoraAdapter {
  readonly name: string;
  readonly base: string;
}

export interface SimulatorSettings {
  readonly host: string;
  readonly port: number;
  readonly h2cPort: number | undefined;
  readonly model: string;
  readonly loras: readonly LoraAdapter[];
  readonly loraLoadMs: number;
  readonly loraUnloadAfterMs: number;
  readonly behaviour: Behaviour;
}

/** Header names a client (test, load generator) sets to change one request. */
export const SIM_HEADER = Object.freeze({
  ttftMs: 'x-sim-ttft-ms',
  itlMs: 'x-sim-itl-ms',
  jitterMs: 'x-sim-jitter-ms',
  outputTokens: 'x-sim-output-tokens',
  tokensPerChunk: 'x-sim-tokens-per-chunk',
  rolePrelude: 'x-sim-role-prelude',
  usage: 'x-sim-usage',
  stamp: 'x-sim-stamp',
  keepAliveMs: 'x-sim-keep-alive-ms',
  closeAfterStream: 'x-sim-close-after-stream',
  terminatorDelayMs: 'x-sim-terminator-delay-ms',
  perRequestMetrics: 'x-sim-per-request-metrics',
  engineQueueMs: 'x-sim-engine-queue-ms',
  enginePrefillMs: 'x-sim-engine-prefill-ms',
  engineLoadMs: 'x-sim-engine-load-ms',
  kneeInFlight: 'x-sim-knee-in-flight',
  pastKneeTtftMs: 'x-sim-past-knee-ttft-ms',
  fault: 'x-sim-fault',
  seed: 'x-sim-seed',
});

const DEFAULT_SETTINGS: SimulatorSettings = Object.freeze({
  host: '127.0.0.1',
  port: 8000,
  h2cPort: undefined,
  model: 'sim-model',
  loras: Object.freeze([]),
  // A 7B model's rank-16 adapter is tens of MB, loaded from host memory or disk in a fraction of a second.
  loraLoadMs: 500,
  // vLLM evicts by use (--max-loras), not by time; an idle time stands in for the other adapters' traffic.
  loraUnloadAfterMs: 300_000,
  behaviour: Object.freeze({
    ttftMs: 50,
    itlMs: 20,
    jitterMs: 0,
    outputTokens: 64,
    tokensPerChunk: 1,
    rolePrelude: true,
    usage: 'auto',
    stamp: false,
    // axum's KeepAlive default, which TGI's router uses for /generate_stream.
    keepAliveMs: 15_000,
    closeAfterStream: false,
    terminatorDelayMs: 0,
    perRequestMetrics: false,
    engineQueueMs: 0,
    enginePrefillMs: 'measured',
    engineLoadMs: 'measured',
    kneeInFlight: 0,
    pastKneeTtftMs: 1000,
  }),
});

/** Long enough for any test or demo, well inside setTimeout's 2^31-1 ms limit. */
const MAX_DELAY_MS = 3_600_000;
const MAX_TOKENS = 1_000_000;

interface ValueType<T> {
  /** What a valid value looks like, for error messages. */
  readonly expected: string;
  /** The value given to the programmatic API, or undefined when it is not valid. */
  fromValue(value: unknown): T | undefined;
  /** The value given as text (a flag or a header), or undefined when it is not valid. */
  fromText(text: string): T | undefined;
}

function numberType(min: number, max: number, integer: boolean): ValueType<number> {
  const syntax = integer ? /^\d+$/ : /^\d+(?:\.\d+)?$/;
  const fromValue = (value: unknown): number | undefined =>
    typeof value === 'number' &&
    (integer ? Number.isInteger(value) : Number.isFinite(value)) &&
    value >= min &&
    value <= max
      ? value
      : undefined;
  return {
    expected: `${integer ? 'an integer' : 'a number'} from ${min} to ${max}`,
    fromValue,
    fromText: (text) => (syntax.test(text) ? fromValue(Number(text)) : undefined),
  };
}

function oneOfType<T extends string>(values: readonly T[]): ValueType<T> {
  const fromValue = (value: unknown): T | undefined =>
    values.find((candidate) => candidate === value);
  return { expected: `one of ${values.join(', ')}`, fromValue, fromText: fromValue };
}

const booleanType: ValueType<boolean> = {
  expected: 'true or false',
  fromValue: (value) => (typeof value === 'boolean' ? value : undefined),
  fromText: (text) => (text === 'true' ? true : text === 'false' ? false : undefined),
};

/** A boolean that also reads 1 and 0, so a load generator can send the short `x-sim-stamp: 1`. */
const switchType: ValueType<boolean> = {
  expected: '1, 0, true or false',
  fromValue: booleanType.fromValue,
  fromText: (text) => (text === '1' ? true : text === '0' ? false : booleanType.fromText(text)),
};

/** Set by a flag of its own and its --no- negation rather than by a value. */
function isSwitch(type: ValueType<unknown>): boolean {
  return type === booleanType || type === switchType;
}

/** Printable and short: the name is echoed into every response and log line. */
const nameType: ValueType<string> = {
  expected: 'a non-empty printable string of at most 256 characters',
  fromValue: (value) =>
    typeof value === 'string' && value.length > 0 && value.length <= 256 && !/\p{Cc}/u.test(value)
      ? value
      : undefined,
  fromText: (text) => nameType.fromValue(text),
};

const millisecondsType = numberType(0, MAX_DELAY_MS, false);

const engineDurationType: ValueType<EngineDuration> = {
  expected: `measured or ${millisecondsType.expected}`,
  fromValue: (value) => (value === 'measured' ? 'measured' : millisecondsType.fromValue(value)),
  fromText: (text) => (text === 'measured' ? 'measured' : millisecondsType.fromText(text)),
};

const faultType: ValueType<Fault> = {
  expected: 'none, status:<400-599>, reset:<n>, truncate:<n>, stall:<n> or error:<n>',
  fromValue: (value) => (typeof value === 'string' ? faultType.fromText(value) : undefined),
  fromText: (text) => {
    if (text === 'none') return { kind: 'none' };
    const match = /^(status|reset|truncate|stall|error):(\d+)$/.exec(text);
    if (match === null) return undefined;
    const kind = match[1] as 'status' | InterruptFault['kind'];
    const count = Number(match[2]);
    if (kind === 'status') return count >= 400 && count <= 599 ? { kind, status: count } : undefined;
    return count <= MAX_TOKENS ? { kind, afterTokens: count } : undefined;
  },
};

interface Setting<T> {
  readonly type: ValueType<T>;
  readonly flag: string;
  /** For --help. */
  readonly help: string;
}

const BEHAVIOUR_SETTINGS: { readonly [K in keyof Behaviour]: Setting<Behaviour[K]> } = {
  ttftMs: { type: millisecondsType, flag: '--ttft-ms', help: 'ms from request received to the first content token' },
  itlMs: { type: millisecondsType, flag: '--itl-ms', help: 'ms between content chunks' },
  jitterMs: { type: millisecondsType, flag: '--jitter-ms', help: 'uniform random ± ms added to each delay' },
  outputTokens: {
    type: numberType(0, MAX_TOKENS, true),
    flag: '--output-tokens',
    help: 'tokens generated unless max_tokens caps them',
  },
  tokensPerChunk: { type: numberType(1, 1000, true), flag: '--tokens-per-chunk', help: 'tokens joined into each delta' },
  rolePrelude: { type: booleanType, flag: '--role-prelude', help: "send vLLM's role-only first chat chunk" },
  usage: {
    type: oneOfType(['auto', 'always', 'never'] as const),
    flag: '--usage',
    help: 'usage chunk: auto (iff stream_options.include_usage), always, never',
  },
  stamp: {
    type: switchType,
    flag: '--stamp',
    help:
      "each content token's text is its chunk's send time, process.hrtime.bigint() ns (CLOCK_MONOTONIC) and a space; header value 1 or 0",
  },
  keepAliveMs: {
    type: millisecondsType,
    flag: '--keep-alive-ms',
    help: 'idle ms before a `:` keep-alive line on TGI streams',
  },
  closeAfterStream: {
    type: switchType,
    flag: '--close-after-stream',
    help: "as llama-server: announce Keep-Alive, then close the connection right after each stream's last chunk; header value 1 or 0",
  },
  terminatorDelayMs: {
    type: millisecondsType,
    flag: '--terminator-delay-ms',
    help: "as uvicorn: write a stream's chunked terminator this many ms after its terminal event, on its own",
  },
  perRequestMetrics: {
    type: switchType,
    flag: '--per-request-metrics',
    help: "as vLLM's --enable-per-request-metrics: `metrics` on the final usage chunk; header value 1 or 0",
  },
  engineQueueMs: { type: millisecondsType, flag: '--engine-queue-ms', help: 'queue time the engine reports (vLLM queue_time_ms)' },
  enginePrefillMs: {
    type: engineDurationType,
    flag: '--engine-prefill-ms',
    help: 'prefill the engine reports (vLLM time_to_first_token_ms, llama.cpp prompt_ms, Ollama prompt_eval_duration), or measured',
  },
  engineLoadMs: { type: engineDurationType, flag: '--engine-load-ms', help: 'model load Ollama reports (load_duration), or measured' },
  kneeInFlight: {
    type: numberType(0, MAX_TOKENS, true),
    flag: '--knee-in-flight',
    help: 'past this many requests in flight (the new one included), TTFT is --past-knee-ttft-ms: a known knee for capacity tests; 0: none',
  },
  pastKneeTtftMs: { type: millisecondsType, flag: '--past-knee-ttft-ms', help: 'ms to the first token past the knee' },
};

const SERVER_SETTINGS = {
  host: { type: nameType, flag: '--host', help: 'listen address' },
  port: { type: numberType(0, 65535, true), flag: '--port', help: 'listen port; 0 picks a free one' },
  h2cPort: {
    type: numberType(0, 65535, true),
    flag: '--h2c-port',
    help: 'also listen here for HTTP/2 cleartext (prior knowledge): the vLLM and Triton gRPC services and every HTTP API; 0 picks a free one',
  },
  model: { type: nameType, flag: '--model', help: 'served model name, used when a request names none' },
  loraLoadMs: { type: millisecondsType, flag: '--lora-load-ms', help: 'ms added to the TTFT of a request to an adapter that is not loaded' },
  loraUnloadAfterMs: { type: millisecondsType, flag: '--lora-unload-after-ms', help: 'an adapter idle this long is unloaded' },
} as const satisfies Record<string, Setting<unknown>>;

const BEHAVIOUR_KEYS = Object.keys(BEHAVIOUR_SETTINGS) as (keyof Behaviour)[];
const ALL_SETTINGS: Readonly<Record<string, Setting<unknown>>> = { ...SERVER_SETTINGS, ...BEHAVIOUR_SETTINGS };

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/**
 * Validates programmatic options over the defaults. Throws TOKENTAP_ERR_CONFIG_INVALID listing
 * every problem, each naming its option.
 */
export function resolveSimulatorOptions(options: SimulatorOptions): SimulatorSettings {
  const given = options as Record<string, unknown>;
  const problems = Object.keys(given)
    .filter((key) => !Object.hasOwn(ALL_SETTINGS, key) && key !== LORAS_KEY)
    .map((key) => `simulator option ${key}: unknown option`);
  function pick<T>(key: string, setting: Setting<T>, fallback: T): T {
    const raw = given[key];
    if (raw === undefined) return fallback;
    const value = setting.type.fromValue(raw);
    if (value !== undefined) return value;
    problems.push(`simulator option ${key}: expected ${setting.type.expected}, got ${describe(raw)}`);
    return fallback;
  }
  const defaults = DEFAULT_SETTINGS.behaviour;
  const behaviour = Object.freeze(
    Object.fromEntries(BEHAVIOUR_KEYS.map((key) => [key, pick<unknown>(key, BEHAVIOUR_SETTINGS[key], defaults[key])])),
  ) as unknown as Behaviour;
  const model = pick('model', SERVER_SETTINGS.model, DEFAULT_SETTINGS.model);
  const settings: SimulatorSettings = Object.freeze({
    host: pick('host', SERVER_SETTINGS.host, DEFAULT_SETTINGS.host),
    port: pick('port', SERVER_SETTINGS.port, DEFAULT_SETTINGS.port),
    h2cPort: pick<number | undefined>('h2cPort', SERVER_SETTINGS.h2cPort, DEFAULT_SETTINGS.h2cPort),
    model,
    loras: lorasOf(given[LORAS_KEY], model, problems),
    loraLoadMs: pick('loraLoadMs', SERVER_SETTINGS.loraLoadMs, DEFAULT_SETTINGS.loraLoadMs),
    loraUnloadAfterMs: pick('loraUnloadAfterMs', SERVER_SETTINGS.loraUnloadAfterMs, DEFAULT_SETTINGS.loraUnloadAfterMs),
    behaviour,
  });
  if (problems.length > 0) throw new TokentapError('TOKENTAP_ERR_CONFIG_INVALID', problems);
  return settings;
}

/** The option (and, as `--lora`, the repeatable flag) that lists the LoRA adapters. */
const LORAS_KEY = 'loras';
const LORA_FLAG = '--lora';
const LORA_EXPECTED = 'name or name=base, each a non-empty printable string of at most 256 characters';

/** `name` (on `model`, the served model) or `name=base`. */
function loraOf(text: string, model: string): LoraAdapter | undefined {
  const at = text.indexOf('=');
  const name = nameType.fromText(at === -1 ? text : text.slice(0, at));
  const base = at === -1 ? model : nameType.fromText(text.slice(at + 1));
  return name === undefined || base === undefined ? undefined : { name, base };
}

function lorasOf(value: unknown, model: string, problems: string[]): readonly LoraAdapter[] {
  if (value === undefined) return DEFAULT_SETTINGS.loras;
  const texts = Array.isArray(value) ? (value as unknown[]) : [value];
  const loras: LoraAdapter[] = [];
  for (const text of texts) {
    const lora = typeof text === 'string' ? loraOf(text, model) : undefined;
    if (lora === undefined) problems.push(`simulator option ${LORAS_KEY}: expected ${LORA_EXPECTED}, got ${describe(text)}`);
    else if (loras.some((known) => known.name === lora.name)) problems.push(`simulator option ${LORAS_KEY}: adapter ${JSON.stringify(lora.name)} given twice`);
    else loras.push(lora);
  }
  return Object.freeze(loras);
}

/**
 * The simulator's command line, one flag per setting: `--host`, `--port`, `--ttft-ms`,
 * `--itl-ms`, `--jitter-ms`, `--output-tokens`, `--tokens-per-chunk`,
 * `--role-prelude`/`--no-role-prelude`, `--usage`, `--stamp`/`--no-stamp`, `--keep-alive-ms`, `--model`. Returns only the options given;
 * throws TOKENTAP_ERR_USAGE naming each bad flag.
 */
export function parseSimulatorFlags(argv: string[]): SimulatorOptions {
  const parseOptions: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = { [LORA_FLAG.slice(2)]: { type: 'string', multiple: true } };
  for (const setting of Object.values(ALL_SETTINGS)) {
    const name = setting.flag.slice(2);
    if (isSwitch(setting.type)) {
      // node:util parseArgs in Node 20 has no `allowNegative`, so the negation is a flag of its own.
      parseOptions[name] = { type: 'boolean' };
      parseOptions[`no-${name}`] = { type: 'boolean' };
    } else {
      parseOptions[name] = { type: 'string' };
    }
  }

  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: parseOptions, strict: true, allowPositionals: false }));
  } catch (error) {
    // parseArgs' own messages already name the flag ("Unknown option '--foo'").
    throw new TokentapError('TOKENTAP_ERR_USAGE', [(error as Error).message]);
  }

  const problems: string[] = [];
  const options: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(ALL_SETTINGS)) {
    const name = setting.flag.slice(2);
    if (isSwitch(setting.type)) {
      const on = values[name] === true;
      const off = values[`no-${name}`] === true;
      if (on && off) problems.push(`${setting.flag} and --no-${name}: give at most one of them`);
      else if (on || off) options[key] = on;
      continue;
    }
    const text = values[name];
    if (typeof text !== 'string') continue;
    const value = setting.type.fromText(text);
    if (value === undefined) {
      problems.push(`${setting.flag}: expected ${setting.type.expected}, got ${JSON.stringify(text)}`);
    } else {
      options[key] = value;
    }
  }
  const loras = values[LORA_FLAG.slice(2)];
  if (Array.isArray(loras)) {
    for (const text of loras) if (typeof text !== 'string' || loraOf(text, '') === undefined) problems.push(`${LORA_FLAG}: expected ${LORA_EXPECTED}, got ${JSON.stringify(text)}`);
    options[LORAS_KEY] = loras;
  }
  if (problems.length > 0) throw new TokentapError('TOKENTAP_ERR_USAGE', problems);
  return options as SimulatorOptions;
}

/** The flags for `--help`, one per line, each with its default and the header that overrides it per request. */
export function simulatorFlagsHelp(): string {
  const defaults: Readonly<Record<string, unknown>> = { ...DEFAULT_SETTINGS, ...DEFAULT_SETTINGS.behaviour };
  const headers: Readonly<Record<string, string>> = SIM_HEADER;
  const settings = Object.entries(ALL_SETTINGS).map(([key, setting]) => ({
    key,
    setting,
    name: isSwitch(setting.type) ? `${setting.flag}, --no-${setting.flag.slice(2)}` : `${setting.flag} <value>`,
  }));
  const loraName = `${LORA_FLAG} <name[=base]>`;
  // The column fits the longest name and two spaces: a longer name must not run into its text.
  const width = Math.max(...settings.map(({ name }) => name.length), loraName.length) + 2;
  const rows = settings.map(({ key, setting, name }) => {
    const header = headers[key] === undefined ? '' : `; per request: ${headers[key]}`;
    return `  ${name.padEnd(width)}${setting.help} (default ${defaults[key] === undefined ? 'none' : String(defaults[key])}${header})`;
  });
  return [
    ...rows,
    `  ${loraName.padEnd(width)}serve a LoRA adapter on base (default: --model), listed by /v1/models with parent = base; repeatable (default none)`,
    `  ${'(header only)'.padEnd(width)}${SIM_HEADER.fault}: ${faultType.expected}`,
    `  ${''.padEnd(width)}  status answers at once; after n content tokens, reset sends a TCP RST, truncate ends`,
    `  ${''.padEnd(width)}  without a terminal event, stall goes silent, error sends the protocol's error event`,
    `  ${'(header only)'.padEnd(width)}${SIM_HEADER.seed}: an integer that fixes the generated text`,
  ].join('\n');
}

/** A header the simulator cannot honour; answered with a 400 naming it. */
export interface HeaderProblem {
  readonly header: string;
  readonly message: string;
}

interface HeaderSetting {
  readonly key: keyof RequestBehaviour;
  readonly type: ValueType<unknown>;
}

const HEADER_SETTINGS: ReadonlyMap<string, HeaderSetting> = new Map<string, HeaderSetting>([
  ...BEHAVIOUR_KEYS.map((key): [string, HeaderSetting] => [SIM_HEADER[key], { key, type: BEHAVIOUR_SETTINGS[key].type }]),
  [SIM_HEADER.fault, { key: 'fault', type: faultType }],
  [SIM_HEADER.seed, { key: 'seed', type: numberType(0, 0xffffffff, true) }],
]);

const SIM_HEADER_PREFIX = 'x-sim-';

/**
 * The behaviour for one request: `base` overridden by its `x-sim-*` headers. An unknown `x-sim-*`
 * header is a problem too, so a typo cannot silently leave a test running with defaults.
 */
export function requestBehaviour(
  base: Behaviour,
  headers: IncomingHttpHeaders,
): { readonly behaviour: RequestBehaviour } | { readonly problems: readonly HeaderProblem[] } {
  const overrides: Record<string, unknown> = {};
  const problems: HeaderProblem[] = [];
  for (const [header, raw] of Object.entries(headers)) {
    if (!header.startsWith(SIM_HEADER_PREFIX)) continue;
    const setting = HEADER_SETTINGS.get(header);
    if (setting === undefined) {
      problems.push({ header, message: `${header}: unknown simulator header; known: ${[...HEADER_SETTINGS.keys()].join(', ')}` });
      continue;
    }
    const value = typeof raw === 'string' ? setting.type.fromText(raw) : undefined;
    if (value === undefined) {
      problems.push({ header, message: `${header}: expected ${setting.type.expected}, got ${JSON.stringify(raw)}` });
    } else {
      overrides[setting.key] = value;
    }
  }
  if (problems.length > 0) return { problems };
  return { behaviour: { fault: { kind: 'none' }, seed: undefined, ...base, ...overrides } as RequestBehaviour };
}
