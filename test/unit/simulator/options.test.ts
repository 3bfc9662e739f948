import { describe, expect, it } from 'vitest';
import { problemsOf } from '../../helpers/problems.js';
import { TokentapError } from '../../../src/errors.js';
import {
  SIM_HEADER,
  parseSimulatorFlags,
  simulatorFlagsHelp,
  startSimulator,
  type SimulatorOptions,
} from '../../../src/simulator/index.js';
import { CHAT_BODY, rawRequest, simulator } from './helpers.js';


describe('parseSimulatorFlags', () => {
  it('maps every flag to its option', () => {
    expect(
      parseSimulatorFlags([
        '--host',
        '0.0.0.0',
        '--port',
        '9000',
        '--ttft-ms',
        '120.5',
        '--itl-ms=15',
        '--jitter-ms',
        '3',
        '--output-tokens',
        '256',
        '--tokens-per-chunk',
        '4',
        '--no-role-prelude',
        '--usage',
        'always',
        '--model',
        'llama',
      ]),
    ).toEqual({
      host: '0.0.0.0',
      port: 9000,
      ttftMs: 120.5,
      itlMs: 15,
      jitterMs: 3,
      outputTokens: 256,
      tokensPerChunk: 4,
      rolePrelude: false,
      usage: 'always',
      model: 'llama',
    });
    expect(parseSimulatorFlags(['--role-prelude'])).toEqual({ rolePrelude: true });
    expect(parseSimulatorFlags([])).toEqual({});
  });

  it('names each bad flag and what is wrong with it', () => {
    const problems = problemsOf(() =>
      parseSimulatorFlags(['--ttft-ms', 'fast', '--port', '70000', '--usage', 'sometimes', '--tokens-per-chunk', '0']),
    );
    expect(problems).toEqual([
      '--port: expected an integer from 0 to 65535, got "70000"',
      '--ttft-ms: expected a number from 0 to 3600000, got "fast"',
      '--tokens-per-chunk: expected an integer from 1 to 1000, got "0"',
      '--usage: expected one of auto, always, never, got "sometimes"',
    ]);
  });

  it('rejects unknown flags, missing values and contradictory switches', () => {
    expect(problemsOf(() => parseSimulatorFlags(['--ttft', '5']))[0]).toMatch(/--ttft/);
    expect(problemsOf(() => parseSimulatorFlags(['--port']))[0]).toMatch(/--port/);
    expect(problemsOf(() => parseSimulatorFlags(['--role-prelude', '--no-role-prelude']))).toEqual([
      '--role-prelude and --no-role-prelude: give at most one of them',
    ]);
  });

  it('documents every flag it accepts and every header, with defaults', () => {
    const help = simulatorFlagsHelp();
    const flags = [...help.matchAll(/^ {2}(--[a-z0-9-]+)/gm)].map((match) => match[1]);
    expect(flags).toEqual(['--host', '--port', '--h2c-port', '--model', '--lora-load-ms', '--lora-unload-after-ms', '--ttft-ms', '--itl-ms', '--jitter-ms', '--output-tokens', '--tokens-per-chunk', '--role-prelude', '--usage', '--stamp', '--keep-alive-ms', '--close-after-stream', '--terminator-delay-ms', '--per-request-metrics', '--engine-queue-ms', '--engine-prefill-ms', '--engine-load-ms', '--knee-in-flight', '--past-knee-ttft-ms', '--lora']);
    for (const header of Object.values(SIM_HEADER)) expect(help).toContain(header);
    expect(help).toMatch(/--ttft-ms <value> +.*\(default 50; per request: x-sim-ttft-ms\)/);
    expect(help).toContain('--no-role-prelude');
    expect(help).toMatch(/--engine-prefill-ms <value> +.*\(default measured; per request: x-sim-engine-prefill-ms\)/);
    expect(help).toMatch(/--stamp, --no-stamp +.*process\.hrtime\.bigint\(\) ns \(CLOCK_MONOTONIC\).*\(default false; per request: x-sim-stamp\)/);
    expect(help).toContain('error:<n>');
    expect(help).toMatch(/--h2c-port <value> +.*gRPC.*\(default none\)/);
    // Every flag name stands apart from its text, the longest included.
    expect(help).toMatch(/--no-close-after-stream {2,}\S/);
    expect(help).toMatch(/--no-per-request-metrics {2,}\S/);
  });

  it('reads --h2c-port, 0 included, and refuses one out of range', () => {
    expect(parseSimulatorFlags(['--h2c-port', '0'])).toEqual({ h2cPort: 0 });
    expect(parseSimulatorFlags(['--h2c-port', '8001'])).toEqual({ h2cPort: 8001 });
    expect(problemsOf(() => parseSimulatorFlags(['--h2c-port', '70000']))).toEqual(['--h2c-port: expected an integer from 0 to 65535, got "70000"']);
  });

  it('reads --lora, repeatable, with or without its base, and the adapter load and unload times', () => {
    expect(parseSimulatorFlags(['--lora', 'sql-lora', '--lora=chat-lora=other-base', '--lora-load-ms', '800', '--lora-unload-after-ms', '2000'])).toEqual({
      loras: ['sql-lora', 'chat-lora=other-base'],
      loraLoadMs: 800,
      loraUnloadAfterMs: 2000,
    });
    expect(problemsOf(() => parseSimulatorFlags(['--lora', '=base', '--lora', 'a=', '--lora', 'ok']))).toEqual([
      '--lora: expected name or name=base, each a non-empty printable string of at most 256 characters, got "=base"',
      '--lora: expected name or name=base, each a non-empty printable string of at most 256 characters, got "a="',
    ]);
  });

  it('reads --stamp and --keep-alive-ms', () => {
    expect(parseSimulatorFlags(['--stamp', '--keep-alive-ms', '250'])).toEqual({ stamp: true, keepAliveMs: 250 });
    expect(parseSimulatorFlags(['--no-stamp'])).toEqual({ stamp: false });
  });

  it('throws the usage error of the catalogue', () => {
    expect(() => parseSimulatorFlags(['--itl-ms', '-1'])).toThrow(/TOKENTAP_ERR_USAGE/);
  });
});

describe('startSimulator options', () => {
  it('rejects invalid and unknown options, naming each', async () => {
    const options = { ttftMs: -1, model: '', colour: 'blue' } as unknown as SimulatorOptions;
    const error = (await startSimulator({ port: 0, ...options }).catch((e: unknown) => e)) as TokentapError;
    expect(error).toBeInstanceOf(TokentapError);
    expect(error.code).toBe('TOKENTAP_ERR_CONFIG_INVALID');
    expect(error.problems).toEqual([
      'simulator option colour: unknown option',
      'simulator option ttftMs: expected a number from 0 to 3600000, got -1',
      'simulator option model: expected a non-empty printable string of at most 256 characters, got ""',
    ]);
  });

  it('rejects an adapter given twice or one that is not a name', async () => {
    await expect(startSimulator({ port: 0, loras: ['a', 'a=b', 'x\u0007'] })).rejects.toMatchObject({
      problems: [
        'simulator option loras: adapter "a" given twice',
        'simulator option loras: expected name or name=base, each a non-empty printable string of at most 256 characters, got "x\\u0007"',
      ],
    });
  });

  it('reports a port already in use as a listen error', async () => {
    const first = await simulator();
    await expect(startSimulator({ port: first.port })).rejects.toThrow(/TOKENTAP_ERR_LISTEN/);
  });
});

describe('x-sim-* request headers', () => {
  it('answers a bad header value with a 400 naming the header', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-sim-ttft-ms': 'soon' });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body.toString('utf8'))).toEqual({
      error: {
        message: 'x-sim-ttft-ms: expected a number from 0 to 3600000, got "soon"',
        type: 'BadRequestError',
        param: 'x-sim-ttft-ms',
        code: 400,
      },
    });
  });

  it('rejects an unknown x-sim-* header rather than ignoring a typo', async () => {
    const sim = await simulator();
    const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { 'x-sim-ttft': '5' });
    expect(res.status).toBe(400);
    const { error } = JSON.parse(res.body.toString('utf8')) as { error: { message: string; param: string } };
    expect(error.param).toBe('x-sim-ttft');
    expect(error.message).toMatch(/^x-sim-ttft: unknown simulator header; known: x-sim-ttft-ms, /);
  });

  it('validates fault and seed values', async () => {
    const sim = await simulator();
    for (const [header, value] of [
      ['x-sim-fault', 'explode'],
      ['x-sim-fault', 'status:200'],
      ['x-sim-fault', 'reset:-1'],
      ['x-sim-seed', '1.5'],
      ['x-sim-usage', 'sometimes'],
      ['x-sim-role-prelude', 'yes'],
      ['x-sim-tokens-per-chunk', '0'],
    ] as const) {
      const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, { [header]: value });
      expect(res.status, `${header}: ${value}`).toBe(400);
      expect((JSON.parse(res.body.toString('utf8')) as { error: { param: string } }).error.param).toBe(header);
    }
  });

  it('overrides the simulator\'s settings for that request only', async () => {
    const sim = await simulator({ outputTokens: 2 });
    const tokens = async (headers: Record<string, string>) => {
      const res = await rawRequest(sim.port, 'POST', '/v1/chat/completions', CHAT_BODY, headers);
      return (JSON.parse(res.body.toString('utf8')) as { usage: { completion_tokens: number } }).usage.completion_tokens;
    };
    expect(await tokens({ 'x-sim-output-tokens': '9' })).toBe(9);
    expect(await tokens({})).toBe(2);
  });
});
