import http from 'node:http';

/**
 * A little steady traffic for the demo: a few concurrent clients streaming chat completions
 * through the proxy, with the simulator's per-request headers varying TTFT and length and
 * injecting the occasional fault, so every outcome shows up on /metrics.
 */
export interface DemoTraffic {
  stop(): Promise<void>;
}

interface Scenario {
  readonly weight: number;
  readonly headers: () => Record<string, string>;
  /** Abort the request this many ms after sending it (a client that gives up). */
  readonly cancelAfterMs?: () => number;
}

const between = (low: number, high: number): number => Math.round(low + Math.random() * (high - low));

const SCENARIOS: readonly Scenario[] = [
  { weight: 88, headers: () => ({ 'x-sim-ttft-ms': String(between(60, 260)), 'x-sim-itl-ms': String(between(12, 30)), 'x-sim-output-tokens': String(between(16, 64)) }) },
  { weight: 5, headers: () => ({ 'x-sim-ttft-ms': '400', 'x-sim-itl-ms': '25' }), cancelAfterMs: () => between(150, 900) },
  { weight: 4, headers: () => ({ 'x-sim-fault': `truncate:${between(3, 20)}` }) },
  { weight: 3, headers: () => ({ 'x-sim-fault': 'status:500' }) },
];
const TOTAL_WEIGHT = SCENARIOS.reduce((sum, s) => sum + s.weight, 0);

function pick(): Scenario {
  let r = Math.random() * TOTAL_WEIGHT;
  for (const scenario of SCENARIOS) {
    r -= scenario.weight;
    if (r < 0) return scenario;
  }
  return SCENARIOS[0] as Scenario;
}

export function startDemoTraffic(proxyUrl: string, clients: number): DemoTraffic {
  const agent = new http.Agent({ keepAlive: true });
  let running = true;
  const inFlight = new Set<http.ClientRequest>();

  const once = (): Promise<void> =>
    new Promise((resolve) => {
      const scenario = pick();
      const body = JSON.stringify({
        model: 'sim-model',
        messages: [{ role: 'user', content: 'Tell me something about inference latency.' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const request = http.request(`${proxyUrl}/v1/chat/completions`, {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', ...scenario.headers() },
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
