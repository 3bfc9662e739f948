import { loadSettings, type SettingOverrides } from '../config/load.js';
import { createLogger } from '../log/logger.js';
import { startSidecar } from '../sidecar.js';
import type { CliIO } from './main.js';

/** `tokentap serve`: validate settings (refusing to start on any problem), run until stopped. */
export async function runServe(flags: SettingOverrides, io: CliIO, stopped: Promise<void>): Promise<number> {
  const settings = loadSettings({ flags, env: io.env });
  const logger = createLogger(settings.logLevel, io.stdout === process.stdout ? 1 : io.stdout);
  const sidecar = await startSidecar(settings, logger);
  logger.info(
    { upstream: settings.upstream.href, proxy: sidecar.proxyUrl, admin: sidecar.adminUrl, config: settings.configFile ?? null },
    'tokentap serving',
  );
  await stopped;
  await sidecar.close();
  logger.info('tokentap stopped');
  logger.flush();
  return 0;
}
