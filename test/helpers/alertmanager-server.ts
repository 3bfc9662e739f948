import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startManagedProcess } from './managed-process.js';
import { requireTool } from './required-tools.js';

/**
 * A real Alertmanager (the Debian 0.25 binary, `/usr/bin/prometheus-alertmanager`) for tests: free
 * loopback port, temporary storage, clustering off (`--cluster.listen-address=`, so no gossip port is
 * taken and it is ready at once).
 *
 *   const receiver = await startWebhookReceiver();
 *   const alertmanager = await startAlertmanager({ route: { receiver: 'hook' }, receivers: [{ name: 'hook', webhook_configs: [{ url: receiver.url }] }] });
 *   const prometheus = await startPrometheus({ alertmanager: alertmanager.url, ... });
 */


export interface AlertmanagerServer {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  readonly address: string;
  /** Alerts Alertmanager currently holds (API v2), with their labels and status. */
  alerts(): Promise<Array<{ labels: Record<string, string>; status: { state: string; inhibitedBy: string[] } }>>;
  output(): string;
  /** Stops Alertmanager and deletes its config and storage. Safe to call twice. */
  stop(): Promise<void>;
}

/** `config` is an Alertmanager configuration object (as parsed from alertmanager.yml); it is written as YAML. */
export async function startAlertmanager(config: object, readyTimeoutMs?: number): Promise<AlertmanagerServer> {
  const process = await startManagedProcess({
    name: 'alertmanager',
    binary: requireTool('alertmanager'),
    readyPath: '/-/ready',
    readyTimeoutMs,
    async prepare(dir, address) {
      const configFile = join(dir, 'alertmanager.yml');
      await writeFile(configFile, stringify(config));
      return [
        `--config.file=${configFile}`,
        `--storage.path=${join(dir, 'data')}`,
        `--web.listen-address=${address}`,
        '--cluster.listen-address=',
        '--log.level=warn',
      ];
    },
  });
  return {
    url: process.url,
    address: process.address,
    async alerts() {
      const response = await fetch(`${process.url}/api/v2/alerts`, { signal: AbortSignal.timeout(10_000) });
      if (!response.ok) throw new Error(`Alertmanager /api/v2/alerts: HTTP ${response.status}`);
      return (await response.json()) as Array<{ labels: Record<string, string>; status: { state: string; inhibitedBy: string[] } }>;
    },
    output: process.output,
    stop: process.stop,
  };
}
