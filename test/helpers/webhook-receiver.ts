import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The receiving end of an Alertmanager `webhook_configs` entry, on a free loopback port: it keeps
 * every notification (Alertmanager webhook payload, version 4) in arrival order.
 */

export interface WebhookAlert {
  status: 'firing' | 'resolved';
  labels: Record<string, string>;
  annotations: Record<string, string>;
  startsAt: string;
  endsAt: string;
}

export interface WebhookNotification {
  /** The path the notification was posted to (e.g. `/pager`), so one receiver can stand in for several Alertmanager receivers. */
  path: string;
  receiver: string;
  status: 'firing' | 'resolved';
  groupLabels: Record<string, string>;
  commonLabels: Record<string, string>;
  alerts: WebhookAlert[];
}

export interface WebhookReceiver {
  /** `http://127.0.0.1:PORT`; append any path. */
  readonly url: string;
  /** Every notification received so far. */
  readonly notifications: readonly WebhookNotification[];
  /** Waits until some notification's alert satisfies `predicate`; returns that alert with its notification. Throws after `timeoutMs` (default 30 s) listing what did arrive. */
  waitForAlert(what: string, predicate: (alert: WebhookAlert, notification: WebhookNotification) => boolean, timeoutMs?: number): Promise<{ alert: WebhookAlert; notification: WebhookNotification }>;
  stop(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const notifications: WebhookNotification[] = [];
  const server = createServer((request, response) => {
    readBody(request).then(
      (body) => {
        notifications.push({ ...(JSON.parse(body) as Omit<WebhookNotification, 'path'>), path: request.url ?? '/' });
        response.writeHead(200).end();
      },
      () => response.writeHead(400).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const find = (predicate: (alert: WebhookAlert, notification: WebhookNotification) => boolean) => {
    for (const notification of notifications) {
      for (const alert of notification.alerts) if (predicate(alert, notification)) return { alert, notification };
    }
    return undefined;
  };

  return {
    url: `http://127.0.0.1:${port}`,
    notifications,
    async waitForAlert(what, predicate, timeoutMs = 30_000) {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const found = find(predicate);
        if (found) return found;
        if (performance.now() > deadline) {
          const seen = notifications.flatMap((n) => n.alerts.map((a) => `${n.path} ${a.status} ${JSON.stringify(a.labels)}`));
          throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; received:\n${seen.join('\n') || '(nothing)'}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
