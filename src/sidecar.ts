import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createAdminServer } from './admin/admin-server.js';
import { systemClock, type Clock } from './clock/clock.js';
import type { Settings } from './config/load.js';
import { TokentapError } from './errors.js';
import { ModelLabels } from './metrics/model-labels.js';
import { Recorder } from './metrics/recorder.js';
import { Telemetry } from './metrics/telemetry.js';
import { createProxyServer } from './proxy/proxy-server.js';

export interface RunningSidecar {
  readonly proxyUrl: string;
  readonly adminUrl: string;
  readonly telemetry: Telemetry;
  close(): Promise<void>;
}

/** The composition root: wires settings into the two listeners. No logic of its own. */
export async function startSidecar(settings: Settings, logger: Logger, clock: Clock = systemClock): Promise<RunningSidecar> {
  const telemetry = new Telemetry();
  const recorder = new Recorder(telemetry.meter, settings.buckets);
  const proxy = createProxyServer({
    upstream: settings.upstream,
    upstreamIdleTimeoutMs: settings.upstreamIdleTimeoutMs,
    monitor: { clock, recorder, models: new ModelLabels(settings.maxModels), logger },
  });
  const admin = createAdminServer({
    telemetry,
    upstream: settings.upstream,
    upstreamHealthPath: settings.upstreamHealthPath,
  });

  await listen(proxy, settings.listen.host, settings.listen.port, 'listen');
  try {
    await admin.listen({ host: settings.adminListen.host, port: settings.adminListen.port });
  } catch (error) {
    proxy.close();
    throw new TokentapError('TOKENTAP_ERR_LISTEN', [`admin_listen ${settings.adminListen.host}:${settings.adminListen.port}: ${(error as Error).message}`]);
  }
  const adminAddress = admin.server.address() as AddressInfo;

  return {
    proxyUrl: urlOf(proxy.address() as AddressInfo),
    adminUrl: urlOf(adminAddress),
    telemetry,
    async close() {
      proxy.closeAllConnections();
      await Promise.all([new Promise((resolve) => proxy.close(resolve)), admin.close()]);
      await telemetry.shutdown();
    },
  };
}

function listen(server: Server, host: string, port: number, setting: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error) => reject(new TokentapError('TOKENTAP_ERR_LISTEN', [`${setting} ${host}:${port}: ${error.message}`])));
    server.listen(port, host, () => resolve());
  });
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host}:${address.port}`;
}
