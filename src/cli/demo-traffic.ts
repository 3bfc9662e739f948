import http from 'node:http';

/**
 * A little steady traffic for the demo: a few concurrent clients streaming completions through the
 * proxy for the example config's workloads (deploy/tokentap.yaml: chat, rag, summarisation, code,
 * default), each with its own latency profile set through the simulator's per-request headers, and
 * the occasional fault, so every outcome and both SLO results show up on /metrics.
 */
export interface DemoTraffic {
  stop(): Promise<void>;
}

interface Weighted {
  readonly weight: number;
}

/** Who is calling: which workload the request falls into, and how fast the upstream serves it. */
interface Caller extends Weighted {
  readonly path: string;
  readonly model: string;
  readonly headers: () => Record<string, string>;
}

/** What goes wrong, if anything. */
interface Scenario extends Weighted {
  readonly headers: () => Record<string, string>;
  /** Abort the request this many ms after sending it (a client that gives up). */
  readonly cancelAfterMs?: () => number;
}

const between = (low: number, high: number): number => Math.round(low + Math.random() * (high - low));

const timing = (ttft: [number, number], itl: [number, number], tokens: [number, number]) => (): Record<string, string> => ({
  'x-sim-ttft-ms': String(between(...ttft)),
  'x-sim-itl-ms': String(between(...itl)),
  'x-sim-output-tokens': String(between(...tokens)),
});

const CHAT = '/v1/chat/completions';
// Within the workloads' thresholds (deploy/tokentap.yaml) with the demo simulator's 4 ms of jitter
// per delay included: chat's 180 ms + 4 under its 200 ms TTFT, code's 24 + 4 ms under its 30 ms
// ITL, rag's 260 ms + 48 tokens x 49 ms under its 3 s e2e. So the status page shows these
// workloads within budget, spending it only on the rare faults below.
const chatTiming = timing([60, 180], [12, 40], [16, 64]);
const ragTiming = timing([120, 260], [20, 45], [24, 48]);
// Summarisation is the one slow on purpose: about a fifth of its first tokens come after its 2 s
// budget (95 % objective), so the page and the SLO line show a workload burning its budget.
const summarisationTiming = timing([400, 2500], [8, 20], [64, 160]);

const CALLERS: readonly Caller[] = [
  { weight: 40, path: CHAT, model: 'sim-model', headers: () => ({ 'x-workload': 'chat', ...chatTiming() }) },
  // Untagged chat clients: the chat workload matches them by path.
  { weight: 10, path: CHAT, model: 'sim-model', headers: () => chatTiming() },
  { weight: 20, path: CHAT, model: 'sim-model', headers: () => ({ 'x-workload': 'rag', ...ragTiming() }) },
  { weight: 10, path: CHAT, model: 'sim-model', headers: () => ({ 'x-workload': 'summarisation', ...summarisationTiming() }) },
  // The code workload is matched by model, not by header.
  { weight: 12, path: CHAT, model: 'qwen2.5-coder-7b-instruct', headers: timing([40, 250], [8, 24], [8, 32]) },
  // Legacy completions endpoint, no header: the last workload (default, no SLO).
  { weight: 8, path: '/v1/completions', model: 'sim-model', headers: timing([50, 300], [10, 30], [8, 48]) },
];
// Rare enough (0.8 % of requests in all) that a 99 % workload stays within budget over 5 minutes,
// frequent enough that every outcome shows up on /metrics within a few minutes.
const SCENARIOS: readonly Scenario[] = [
  { weight: 992, headers: () => ({}) },
  { weight: 4, headers: () => ({ 'x-sim-ttft-ms': '400', 'x-sim-itl-ms': '25' }), cancelAfterMs: () => between(150, 900) },
  { weight: 2, headers: () => ({ 'x-sim-fault': `truncate:${between(3, 20)}` }) },
  { weight: 2, headers: () => ({ 'x-sim-fault': 'status:500' }) },
];

/**
 * What the demo does on purpose, said on the status page and in the banner: without it a first
 * look reads a red page as tokentap or the simulator being broken.
 */
export const DEMO_TRAFFIC_NOTICE =
  'Demo: this traffic is synthetic and made to fail on purpose. The demo clients inject faults into about 1 request in 125 ' +
  '(client cancellations, truncated streams, HTTP 500) and slow the prefill of summarisation (first tokens up to 2.5 s against its 2 s budget), ' +
  'so budgets burning here is the demo working, not a fault.';

function pick<T extends Weighted>(choices: readonly T[]): T {
  let r = Math.random() * choices.reduce((sum, c) => sum + c.weight, 0);
  for (const choice of choices) {
    r -= choice.weight;
    if (r < 0) return choice;
  }
  return choices[0] as T;
}

export function startDemoTraffic(proxyUrl: string, clients: number): DemoTraffic {
  const agent = new http.Agent({ keepAlive: true });
  let running = true;
  const inFlight = new Set<http.ClientRequest>();

  const once = (): Promise<void> =>
    new Promise((resolve) => {
      const caller = pick(CALLERS);
      const scenario = pick(SCENARIOS);
      const prompt = 'Tell me something about inference latency.';
      const body = JSON.stringify({
        model: caller.model,
        ...(caller.path === CHAT ? { messages: [{ role: 'user', content: prompt }] } : { prompt }),
        stream: true,
        stream_options: { include_usage: true },
      });
      const request = http.request(`${proxyUrl}${caller.path}`, {
        method: 'POST',
        agent,
        // The scenario's headers come last: a fault's timing overrides the caller's.
        headers: { 'content-type': 'application/json', ...caller.headers(), ...scenario.headers() },
      });
      inFlight.add(request);
      const done = (): void => {
        inFlight.delete(request);
        resolve();
      };
      request.on('response', (response) => {
        response.resume();
        response.on('end', done);
        response.on('error', done);
      });
      request.on('error', done);
      request.on('close', done);
      if (scenario.cancelAfterMs) setTimeout(() => request.destroy(), scenario.cancelAfterMs());
      request.end(body);
    });

  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      await once();
      await new Promise((resolve) => setTimeout(resolve, between(50, 400)));
    }
  });

  return {
    async stop() {
      running = false;
      for (const request of inFlight) request.destroy();
      await Promise.all(loops);
      agent.destroy();
    },
  };
}
