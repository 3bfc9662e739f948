import type { FastifyInstance } from 'fastify';
import { sharedWhileComputing } from './admin-limits.js';
import { STATUS_PAGE_CSP, statusPageHtml } from './status-page.js';
import type { StatusSource } from './status-source.js';

/**
 * `GET /` and `GET /status`: the page; `GET /status.json`: its data (docs/status-page.md). Each
 * answer is computed when asked for, from one collection of the metrics /metrics serves; nothing
 * is cached for a client, since a stale status page is worse than a slow one (requests that come
 * while a report is being computed share it).
 */
export function registerStatusRoutes(app: FastifyInstance, source: StatusSource): void {
  const report = sharedWhileComputing(() => source.report());
  const page = async (): Promise<string> => statusPageHtml(await report());
  for (const path of ['/', '/status']) {
    app.get(path, async (_request, reply) =>
      reply
        .header('content-type', 'text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('content-security-policy', STATUS_PAGE_CSP)
        .send(await page()),
    );
  }
  app.get('/status.json', async (_request, reply) => reply.header('cache-control', 'no-store').send(await report()));
  app.addHook('onClose', async () => source.stop());
}
