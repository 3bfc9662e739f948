import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DCGM_FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'dcgm');

/** A DCGM exporter /metrics sample (see test/fixtures/dcgm/README.md). */
export function dcgmFixture(name: string): string {
  return readFileSync(join(DCGM_FIXTURES, name), 'utf8');
}

export function dcgmFixtureNames(): string[] {
  return readdirSync(DCGM_FIXTURES).filter((n) => n.endsWith('.prom')).sort();
}

export type ExporterBehaviour =
  | { readonly kind: 'text'; readonly body: string }
  | { readonly kind: 'status'; readonly status: number }
  /** Accepts the request and never answers. */
  | { readonly kind: 'hang' };

/**
 * A stand-in for the node-local DCGM exporter on a loopback ephemeral port: real HTTP, serving
 * whatever `behaviour` says at the time of each request, and counting requests and the most that
 * were ever open at once (to show a slow exporter is not piled up on).
 */
export async function startDcgmExporter(initial: ExporterBehaviour) {
  let behaviour = initial;
  let requests = 0;
  let open = 0;
  let maxOpen = 0;
  const server: Server = createServer((_req, res) => {
    requests++;
    open++;
    maxOpen = Math.max(maxOpen, open);
    res.on('close', () => open--);
    const now = behaviour;
    if (now.kind === 'hang') return;
    if (now.kind === 'status') {
      res.writeHead(now.status, { 'content-type': 'text/plain' }).end('exporter error\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(now.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/metrics`,
    serve(next: ExporterBehaviour) {
      behaviour = next;
    },
    get requests() {
      return requests;
    },
    get maxOpen() {
      return maxOpen;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
