import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/simulator/index.js';
import { eventually } from '../../helpers/sidecar.js';
import { collectObjects, REPO } from './kustomize-tree.js';
import { resolvedEnv, sidecarOf, type DeploymentLike } from './pod-wiring.js';

/**
 * What the image's runtime stage holds, assembled without Docker: package.json, bin/, the built
 * dist/ and only the production dependencies of package-lock.json (what `npm ci --omit=dev`
 * installs, linked from this checkout's node_modules), with no sources and no dev dependencies.
 * Packages resolve their own imports from where they really live, so what this proves is that the
 * program (dist/) imports nothing but production dependencies. Started with the native-sidecar
 * container's environment and the ConfigMap's config file, it must serve, route by the configured
 * workloads and exit 0 on SIGTERM; a runtime import of a dev dependency would fail here.
 */

let app: string;
let simulator: RunningSimulator;

function assembleRuntime(into: string): void {
  cpSync(path.join(REPO, 'package.json'), path.join(into, 'package.json'));
  cpSync(path.join(REPO, 'bin'), path.join(into, 'bin'), { recursive: true });
  cpSync(path.join(REPO, 'dist'), path.join(into, 'dist'), { recursive: true });
  const lock = JSON.parse(readFileSync(path.join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean; devOptional?: boolean }> };
  for (const [key, entry] of Object.entries(lock.packages)) {
    // Top-level packages only: a nested node_modules (a second version) comes with its parent.
    if (!key.startsWith('node_modules/') || key.lastIndexOf('node_modules/') !== 0 || entry.dev === true || entry.devOptional === true) continue;
    const source = path.join(REPO, key);
    if (!existsSync(source)) continue; // an optional dependency for another platform
    // A link, not a copy (60 MB): what matters is which names dist/ can resolve from the app.
    mkdirSync(path.dirname(path.join(into, key)), { recursive: true });
    symlinkSync(source, path.join(into, key), 'dir');
  }
}

beforeAll(async () => {
  expect(existsSync(path.join(REPO, 'dist/cli/main.js')), 'run `npm run build` first (npm test does)').toBe(true);
  app = mkdtempSync(path.join(tmpdir(), 'tokentap-image-'));
  assembleRuntime(app);
  simulator = await startSimulator({ port: 0, ttftMs: 10, itlMs: 2, outputTokens: 6 });
});

afterAll(async () => {
  await simulator?.close();
  if (app !== undefined) rmSync(app, { recursive: true, force: true });
});

describe('the runtime image contents', () => {
  it('hold production dependencies only, no sources', () => {
    for (const dev of ['typescript', 'vitest', 'kubernetes-models', 'dockerfile-ast', 'openai']) expect(existsSync(path.join(app, 'node_modules', dev)), dev).toBe(false);
    for (const prod of ['fastify', 'yaml', 'zod', '@opentelemetry/sdk-metrics']) expect(existsSync(path.join(app, 'node_modules', prod)), prod).toBe(true);
    expect(existsSync(path.join(app, 'src'))).toBe(false);
    // So a dev dependency imported by the program would fail to resolve, as in the image.
    const resolves = (name: string) => spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(name)})`], { cwd: app, timeout: 20_000 }).status === 0;
    expect([resolves('yaml'), resolves('typescript')]).toEqual([true, false]);
  });

  it('run `tokentap serve` with the pod\'s environment and config: serving, routing by workload, exiting 0 on SIGTERM', async () => {
    const objects = collectObjects(path.join(REPO, 'deploy/kubernetes/variants/native-sidecar'));
    const deployment = objects.find((o) => o.object['kind'] === 'Deployment')?.object as unknown as DeploymentLike;
    const configMap = objects.find((o) => o.object['kind'] === 'ConfigMap' && (o.object['metadata'] as { name: string }).name === 'tokentap-config')?.object as { data: Record<string, string> };
    const container = sidecarOf(deployment.spec.template.spec)?.container;
    expect(container).toBeDefined();
    const problems: string[] = [];
    const podEnv = resolvedEnv(container as NonNullable<typeof container>, problems, 'deployment', { 'metadata.name': 'llm-7d9f-abcde', 'metadata.namespace': 'llm-serving' });
    expect(problems).toEqual([]);
    expect(podEnv['TOKENTAP_FINAL_SCRAPE_WAIT']).toBe('15s');
    const configFile = path.join(app, 'tokentap.yaml');
    writeFileSync(configFile, configMap.data['tokentap.yaml'] as string);

    // The pod's variables exactly (no inherited OTEL_* or TOKENTAP_*), with the file and the
    // simulator where this machine has them, and ephemeral ports instead of 8080 and 9464.
    const child = spawn(process.execPath, ['bin/tokentap.js', ...(container?.args ?? []), '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'], {
      cwd: app,
      env: { PATH: process.env['PATH'] ?? '', ...podEnv, TOKENTAP_CONFIG: configFile, TOKENTAP_UPSTREAM: simulator.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const line = await eventually(`"tokentap serving" (stderr: ${stderr})`, () => stdout.split('\n').find((l) => l.includes('tokentap serving')), (l) => l !== undefined || child.exitCode !== null, 20_000);
      expect(line, stderr).toBeDefined();
      const { proxy, admin } = JSON.parse(line as string) as { proxy: string; admin: string };

      expect((await fetch(`${admin}/healthz`)).status).toBe(200);
      await eventually('ready', async () => (await fetch(`${admin}/readyz`)).status, (status) => status === 200, 10_000);
      const response = await fetch(`${proxy}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-workload': 'chat' },
        body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(await response.text()).toContain('data: [DONE]');
      // "chat" exists only in the ConfigMap's config: seeing it proves that file was loaded.
      const metrics = await eventually('the request counted', async () => (await fetch(`${admin}/metrics`)).text(), (text) => /tokentap_requests_total\{[^}]*workload="chat"/.test(text), 10_000);
      expect(metrics).toMatch(/tokentap_requests_total\{[^}]*outcome="completed"/);

      // The pod waits for one more scrape after the drain (TOKENTAP_FINAL_SCRAPE_WAIT): Prometheus's
      // next scrape, here one every 200 ms, lets it exit at once instead of after the whole wait.
      child.kill('SIGTERM');
      const scrapeStartedAt = performance.now();
      for (let i = 0; i < 25 && child.exitCode === null; i++) {
        await fetch(`${admin}/metrics`).then((r) => r.text(), () => '');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(await exited).toBe(0);
      expect(performance.now() - scrapeStartedAt).toBeLessThan(5_000);
      expect(stdout).toContain('final scrape served: exiting');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 60_000);
});
