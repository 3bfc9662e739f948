import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WorkloadProfile } from '../../../src/profile/workload-profile.js';

/**
 * A stand-in for a sidecar's admin listener (real HTTP on loopback): `/profile/<workload>` answers
 * the profile the test sets, `/status.json` the latencies; every request is recorded.
 */
export interface FakeAdmin {
  url: string;
  profiles: Map<string, WorkloadProfile>;
  /** Bodies answered as they are, by path, before anything else: for answers no sidecar would give. */
  raw: Map<string, string>;
  asked: string[];
  close(): Promise<void>;
}
export async function fakeAdmin(): Promise<FakeAdmin> {
  const profiles = new Map<string, WorkloadProfile>();
  const asked: string[] = [];
  const raw = new Map<string, string>();
  const server = http.createServer((request, response) => {
    asked.push(request.url ?? '');
    const body = raw.get(new URL(request.url ?? '/', 'http://admin').pathname);
    if (body !== undefined) return void response.writeHead(200, { 'content-type': 'application/json' }).end(body);
    const url = new URL(request.url ?? '/', 'http://admin');
    const match = /^\/profile\/([^/]+)$/.exec(url.pathname);
    if (match !== null && url.searchParams.get('format') === 'json') {
      const profile = profiles.get(decodeURIComponent(match[1] as string));
      if (profile !== undefined) return void response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(profile));
    }
    if (url.pathname === '/status.json') {
      const workloads = [...profiles.keys()].map((name) => ({ name, latency: { ttft: { p50_s: 0.25, p99_s: 0.9 }, itl: { p50_s: 0.02, p99_s: 0.06 }, e2e: {} } }));
      return void response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ schema_version: 1, windows: { rate_s: 60, slo_s: 300 }, workloads }));
    }
    // As the profile routes refuse a workload they keep no record of.
    response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `no workload-shape record for workload "${match?.[1] ?? ''}"; recorded workloads: chat (a workload with profile: false keeps none)` }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    profiles,
    raw,
    asked,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

