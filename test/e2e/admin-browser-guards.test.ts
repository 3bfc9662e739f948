/// <reference lib="dom" />
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireTool } from '../helpers/required-tools.js';
import { startServeProcess } from '../helpers/serve-process.js';
import { profileRouteAbsent } from '../helpers/status-page-console.js';

/**
 * The admin listener against a web page in an SRE's browser (Debian's Chromium, headless), found by
 * a hostile review of the admin listener:
 *
 * - DNS rebinding: a page served from `rebind.example:9464` that then resolves its own name to
 *   127.0.0.1, where `kubectl port-forward` listens, reads the admin listener's answers as its
 *   own origin's. Chromium here resolves `rebind.example` to 127.0.0.1 from the start
 *   (`--host-resolver-rules`), which is where a rebinding attack ends: the page, /status.json and
 *   /profile answered it 200, with every workload name and figure.
 * - The Content-Security-Policy: it allowed every inline script (`'unsafe-inline'`), so a script
 *   element any escaping slip let into the page would have run.
 *
 * `tokentap serve` runs from dist/ (as users run it), with nothing upstream.
 */

const REBOUND_NAME = 'rebind.example';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--host-resolver-rules=MAP ${REBOUND_NAME} 127.0.0.1`];

let serve: Awaited<ReturnType<typeof startServeProcess>>;
let browser: Browser;
let port: string;

beforeAll(async () => {
  serve = await startServeProcess('http://127.0.0.1:1');
  port = new URL(serve.admin).port;
  browser = await chromium.launch({ executablePath: requireTool('chromium'), args: CHROMIUM_ARGS });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  serve?.kill();
});

/** A fresh page collecting script errors and console errors (the shape section's 404 for an absent /profile aside). */
async function newPage(): Promise<{ page: Page; problems: string[] }> {
  const page = await (await browser.newContext()).newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (profileRouteAbsent(message)) return;
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  return { page, problems };
}

describe('the admin listener in Chromium', () => {
  it('answers a page rebound to it (rebind.example resolving to 127.0.0.1) 421, the page, /status.json and /profile alike, and nothing of the report', async () => {
    const { page } = await newPage();
    const response = await page.goto(`http://${REBOUND_NAME}:${port}/status`);
    expect(response?.status()).toBe(421);
    const body = await response?.text();
    expect(body).not.toContain('workload');
    // The rebound page's own script, reading its origin as an attacker's would.
    const reads = await page.evaluate(async () =>
      Promise.all(['/status.json', '/profile', '/metrics'].map(async (path) => {
        const answer = await fetch(path);
        return { path, status: answer.status, text: await answer.text() };
      })),
    );
    for (const read of reads) {
      expect(read.status, read.path).toBe(421);
      expect(read.text, read.path).not.toMatch(/"workloads"|tokentap_requests|"default"/);
    }
    await page.context().close();
  });

  it('renders the page through a port-forward, at localhost and at 127.0.0.1, its scripts running and fetching /status.json', async () => {
    for (const origin of [`http://localhost:${port}`, `http://127.0.0.1:${port}`]) {
      const { page, problems } = await newPage();
      const response = await page.goto(`${origin}/`);
      expect(response?.status(), origin).toBe(200);
      const update = await page.waitForResponse((r) => r.url() === `${origin}/status.json`, { timeout: 15_000 });
      expect(update.status(), origin).toBe(200);
      await page.waitForFunction(() => document.querySelector('article[data-workload="default"]') !== null, undefined, { timeout: 10_000 });
      expect(await page.locator('#version').textContent()).toMatch(/^v\d/);
      expect(problems, origin).toEqual([]);
      await page.context().close();
    }
  });

  it("runs the page's own style and scripts under its Content-Security-Policy, and refuses a script element put into the page", async () => {
    const { page, problems } = await newPage();
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForFunction(() => document.querySelector('article[data-workload="default"]') !== null, undefined, { timeout: 10_000 });
    // The stylesheet applied: the header's panel colour is the page's own.
    expect(await page.locator('header.top').evaluate((el) => getComputedStyle(el).backgroundColor)).toBe('rgb(246, 248, 250)');
    expect(problems).toEqual([]);
    const injected = await page.evaluate(async () => {
      const violations: string[] = [];
      document.addEventListener('securitypolicyviolation', (event) => violations.push(event.effectiveDirective));
      const script = document.createElement('script');
      script.textContent = 'window.injectedScriptRan = true;';
      document.body.append(script);
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { ran: (window as unknown as { injectedScriptRan?: boolean }).injectedScriptRan === true, violations };
    });
    expect(injected).toEqual({ ran: false, violations: ['script-src-elem'] });
    await page.context().close();
  });

  it('refuses, 403, what a page of another site makes the browser ask of the admin listener (no-cors fetches), and still opens the status page from a link on it', async () => {
    // The other site: a page at localhost (another site than 127.0.0.1) on a port of its own.
    const other = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end('<!doctype html><title>another site</title><a id="to-status" href="http://127.0.0.1:' + port + '/status">status</a>');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const otherPort = (other.address() as AddressInfo).port;
    try {
      const { page } = await newPage();
      const statuses = new Map<string, number>();
      page.on('response', (response) => {
        if (response.url().startsWith(`http://127.0.0.1:${port}/`)) statuses.set(new URL(response.url()).pathname, response.status());
      });
      await page.goto(`http://localhost:${otherPort}/`);
      await page.evaluate(async (admin) => {
        // Each of these changes something on main: spends /profile's time share, ends the final-scrape wait, probes the upstream.
        await Promise.all(['/profile', '/metrics', '/readyz', '/status.json'].map((path) => fetch(admin + path, { mode: 'no-cors' }).catch(() => undefined)));
      }, `http://127.0.0.1:${port}`);
      await expect.poll(() => statuses.size, { timeout: 5_000, message: JSON.stringify(Object.fromEntries(statuses)) }).toBe(4);
      expect(Object.fromEntries(statuses)).toEqual({ '/profile': 403, '/metrics': 403, '/readyz': 403, '/status.json': 403 });
      // A link from the other site to the page: a navigation, answered.
      const [navigation] = await Promise.all([page.waitForNavigation(), page.click('#to-status')]);
      expect(navigation?.status()).toBe(200);
      await page.waitForFunction(() => document.querySelector('article[data-workload="default"]') !== null, undefined, { timeout: 10_000 });
      await page.context().close();
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });
});
