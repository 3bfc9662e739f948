/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import Fastify, { type FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerStatusRoutes } from '../../src/admin/status-routes.js';
import type { StatusSource } from '../../src/admin/status-source.js';
import type { Distribution, ProfileSet, WorkloadProfile } from '../../src/profile/workload-profile.js';
import { builtStatusReport, quietWorkload } from '../helpers/built-status-report.js';
import { requireTool } from '../helpers/required-tools.js';
import { profileRouteAbsent } from '../helpers/status-page-console.js';

/**
 * The status page's "Traffic shape" section (src/admin/status-page-shape.ts) in Chromium: the page
 * and /status.json served by the real status routes, from a report built here, and the profile
 * routes (`GET /profile?format=json`, `GET /profile/<workload>?format=...`) either absent (a sidecar
 * without workload profiles) or stood in for by this test with a ProfileSet it builds.
 */

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const LAPTOP = { width: 1400, height: 900 };
const PHONE = { width: 400, height: 844 };
const WORKLOADS = ['chat', 'rag', 'batch'];

const REPORT = builtStatusReport(WORKLOADS.map((name) => quietWorkload(name)));

function lengths(count: number, min: number, p50: number, p90: number, p99: number, max: number, mean: number, stdev: number): Distribution {
  return { count, mean, stdev, min, max, p50, p90, p99, fit: { family: 'lognormal', params: { mu: Math.log(p50), sigma: 0.9 }, ks: 0.031 } };
}

const WINDOW = { startUnixMs: Date.UTC(2026, 11, 1, 11), endUnixMs: Date.UTC(2026, 11, 1, 12), seconds: 3600 };

function profile(workload: string, overrides: Partial<WorkloadProfile>): WorkloadProfile {
  return {
    workload,
    window: WINDOW,
    requests: 0,
    inputTokens: { count: 0 },
    outputTokens: { count: 0 },
    arrivals: { ratePerSecond: 0 },
    concurrency: { mean: 0, max: 0 },
    prefixSharing: { blockTokens: 512, sharedPrefixShare: 0, sharedBlockShare: 0 },
    outcomes: {},
    ...overrides,
  };
}

/** chat: long-tailed and bursty with shared prefixes; rag: every request the same length; batch: nothing recorded. */
const PROFILES: ProfileSet = {
  window: WINDOW,
  mix: { chat: 0.8, rag: 0.2 },
  workloads: [
    profile('chat', {
      requests: 7200,
      inputTokens: lengths(7100, 12, 640, 2900, 11800, 31000, 1020, 1400),
      outputTokens: lengths(7100, 1, 150, 520, 1600, 4000, 210, 260),
      arrivals: { ratePerSecond: 2, interArrivalCv: 2.37, gammaShape: 0.178 },
      concurrency: { mean: 3.4, max: 19 },
      cachedInputShare: 0.41,
      prefixSharing: { blockTokens: 512, sharedPrefixShare: 0.63, sharedBlockShare: 0.38 },
      outcomes: { completed: 7190, client_cancelled: 10 },
    }),
    profile('rag', {
      requests: 1800,
      inputTokens: { count: 1800, mean: 257, stdev: 0, min: 257, max: 257, p50: 257, p90: 257, p99: 257 },
      outputTokens: { count: 1800, mean: 128, stdev: 0, min: 128, max: 128, p50: 128, p90: 128, p99: 128 },
      arrivals: { ratePerSecond: 0.5, interArrivalCv: 1.02, gammaShape: 0.96 },
      concurrency: { mean: 1, max: 2 },
      outcomes: { completed: 1800 },
    }),
  ],
};

/** The export texts the fake profile route answers; what the copy buttons must put on the clipboard. */
function exportText(workload: string, format: string): string {
  if (format === 'mooncake') return `{"timestamp": 0, "input_length": 700, "output_length": 150, "hash_ids": [0, 1]}\n{"timestamp": 41, "input_length": 300, "output_length": 90, "hash_ids": [0]}\n`;
  return `# ${format} export of ${workload}\nprompt_tokens=640,prompt_tokens_stdev=1400\n`;
}

async function adminApp(withProfiles: boolean, profileSet: unknown = PROFILES): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify({ logger: false });
  const source = { report: async () => REPORT, stop: () => undefined } as unknown as StatusSource;
  registerStatusRoutes(app, source);
  if (withProfiles) {
    app.get('/profile', async (request, reply) => {
      expect((request.query as Record<string, string>)['format']).toBe('json');
      return reply.header('cache-control', 'no-store').send(profileSet);
    });
    app.get<{ Params: { workload: string }; Querystring: { format: string } }>('/profile/:workload', async (request, reply) => {
      // As the profile routes refuse an export with nothing in it.
      if (request.params.workload === 'rag' && request.query.format === 'mooncake') return reply.code(404).send({ error: 'no request of workload "rag" in the window reported both its input and output tokens' });
      return reply.header('content-type', 'text/plain; charset=utf-8').send(exportText(request.params.workload, request.query.format));
    });
  }
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url };
}

let browser: Browser;
/** Every GET /profile any page of this file sent. */
const profileRequests: string[] = [];
let without: { app: FastifyInstance; url: string };
let withProfiles: { app: FastifyInstance; url: string };
let broken: { app: FastifyInstance; url: string };

beforeAll(async () => {
  browser = await chromium.launch({ executablePath: requireTool('chromium'), args: CHROMIUM_ARGS });
  without = await adminApp(false);
  withProfiles = await adminApp(true);
  // Not a ProfileSet: an answer from something that is not tokentap's profile route.
  broken = await adminApp(true, { workloads: 'none' });
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await without?.app.close();
  await withProfiles?.app.close();
  await broken?.app.close();
});

/** The page, once its shape script has read the profile route and rendered every card's section. */
/** Where a page with the test's clock starts its time (any instant will do). */
const FAKE_CLOCK_START = Date.UTC(2026, 0, 1);

async function open(url: string, viewport: { width: number; height: number }, fakeClock = false): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  // The page's timers under the test's control, when asked: refreshes happen when the test says.
  if (fakeClock) {
    // Paused from the start: flowing with the wall clock, the page's time moved on while it loaded
    // (seconds on a loaded machine) and carried its next ask into the test's first 29 s.
    await page.clock.install({ time: FAKE_CLOCK_START });
    await page.clock.pauseAt(FAKE_CLOCK_START + 1_000);
  }
  page.on('request', (request) => {
    if (new URL(request.url()).pathname === '/profile') profileRequests.push(request.url());
  });
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() !== 'error' && message.type() !== 'warning') return;
    // Only the 404 of a sidecar without profiles, which the section explains, is expected.
    if (url === without.url && profileRouteAbsent(message)) return;
    problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('request', (request) => {
    if (!request.url().startsWith(url)) problems.push(`external request: ${request.url()}`);
  });
  await page.goto(`${url}/`);
  await page.waitForFunction(() => document.body.dataset['shapeAt'] !== undefined, undefined, { timeout: 10_000 });
  return { page, problems };
}

/** Text cut off inside the shape sections: a box narrower than its content, chart text outside its image. */
async function shapeLayoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = [];
    for (const el of document.querySelectorAll('.shape, .shape *')) {
      // .sr-only is clipped on purpose: it is read out, not shown.
      if (el.getClientRects().length === 0 || el instanceof SVGElement || el.classList.contains('sr-only')) continue;
      if (el.scrollWidth > el.clientWidth + 1) problems.push(`overflows: <${el.tagName.toLowerCase()} class="${el.getAttribute('class') ?? ''}"> (${el.scrollWidth} > ${el.clientWidth})`);
      const r = el.getBoundingClientRect();
      if (r.right > document.documentElement.clientWidth + 0.5) problems.push(`off screen: <${el.tagName.toLowerCase()}> "${(el.textContent ?? '').slice(0, 40)}"`);
    }
    for (const text of document.querySelectorAll('.shape svg text')) {
      const image = (text as SVGTextElement).ownerSVGElement!.getBoundingClientRect();
      const r = text.getBoundingClientRect();
      if (r.left < image.left - 0.5 || r.right > image.right + 0.5) problems.push(`chart text cut off: "${text.textContent}"`);
    }
    return problems;
  });
}

describe('the traffic shape section of the status page, in Chromium', () => {
  it('says why it is empty when the sidecar serves no profile route, never "n/a", with every copy button disabled', async () => {
    const { page, problems } = await open(without.url, LAPTOP);
    for (const name of WORKLOADS) {
      const section = page.locator(`section[data-shape="${name}"]`);
      expect(await section.locator('[data-empty]').getAttribute('data-empty')).toBe('unavailable');
      expect(await section.locator('[data-empty]').textContent()).toBe(
        'No requests recorded: this sidecar serves no workload profiles (GET profile answered HTTP 404), so there is no shape to show or export.',
      );
      expect(await section.locator('button:disabled').count()).toBe(3);
    }
    expect(await page.locator('main').textContent()).not.toMatch(/n\/a/i);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('says it cannot read an answer that is not a profile set, and asks again 30 s later', async () => {
    const { page, problems } = await open(broken.url, LAPTOP, true);
    const empty = page.locator('section[data-shape="chat"] [data-empty]');
    expect(await empty.getAttribute('data-empty')).toBe('unavailable');
    expect(await empty.textContent()).toMatch(/^Could not show the traffic shape: profile answered what this page cannot read \(.+\)\.$/);
    const asked = (): number => profileRequests.length;
    const before = asked();
    await page.clock.runFor(29_000);
    expect(asked()).toBe(before);
    await page.clock.runFor(2_000);
    await expect.poll(asked, { timeout: 5_000 }).toBe(before + 1);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it("shows each workload's lengths, burstiness and prefix sharing as the profile says, and why a workload without requests has none", async () => {
    const { page, problems } = await open(withProfiles.url, LAPTOP);
    const chat = page.locator('section[data-shape="chat"]');
    expect(await chat.locator('h4').textContent()).toBe('Traffic shape, last 60 min');
    expect(await chat.locator('[data-field="interarrival-cv"]').getAttribute('data-value')).toBe('2.37');
    expect(await chat.locator('dd', { hasText: 'CV' }).textContent()).toBe('CV 2.37: bursty (1 = Poisson, 0 = evenly spaced, above 1 = bursts) · gamma shape 0.18');
    expect(await chat.locator('[data-field="shared-prefix-share"]').getAttribute('data-value')).toBe('0.63');
    expect(await chat.locator('dd', { hasText: 'block' }).textContent()).toBe(
      '63 % of requests share their first 512-token block with another; 38 % of blocks were seen before; 41 % of requests had cached input tokens (server-reported)',
    );
    expect(await chat.locator('[data-field="input-p99"]').getAttribute('data-value')).toBe('11800');
    // Four bars, the widest-spread (p99 to max) the lowest: a long tail reads as long and low.
    const bars = await chat.locator('svg[data-histogram="Input tokens"] rect').evaluateAll((rects) => rects.map((r) => ({ width: Number(r.getAttribute('width')), height: Number(r.getAttribute('height')) })));
    expect(bars).toHaveLength(4);
    expect(bars[0]!.height).toBeGreaterThan(bars[3]!.height);
    expect(await chat.locator('svg[data-histogram="Input tokens"]').getAttribute('aria-label')).toBe(
      'Input tokens of chat: 7100 requests; half at most 640 tokens, 90 % at most 2,900, 99 % at most 11,800, longest 31,000',
    );
    expect(await chat.locator('button:enabled').count()).toBe(3);
    // Fixed lengths: one bar, said in words.
    expect(await page.locator('section[data-shape="rag"] svg[data-histogram="Input tokens"] text').textContent()).toBe('every request: 257 tokens');
    expect(await page.locator('section[data-shape="batch"] [data-empty]').textContent()).toBe(
      'No requests recorded yet in the last 60 min (or profiling is off for this workload), so there is no shape to show or export.',
    );
    expect(await page.locator('section[data-shape="batch"] button:disabled').count()).toBe(3);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('copies each export, as the same origin serves it, to the clipboard', async () => {
    const { page, problems } = await open(withProfiles.url, LAPTOP);
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: withProfiles.url });
    const chat = page.locator('section[data-shape="chat"]');
    for (const [format, label] of [['guidellm', 'GuideLLM scenario'], ['aiperf', 'AIPerf flags'], ['mooncake', 'Mooncake trace']] as const) {
      await chat.locator(`button[data-format="${format}"]`).click();
      const expected = exportText('chat', format);
      await expect.poll(() => chat.locator('.copy-status').textContent(), { timeout: 5_000 }).toBe(`Copied the ${label} (${Buffer.byteLength(expected)} bytes).`);
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(expected);
    }
    // A refusal is said with the route's own reason.
    const rag = page.locator('section[data-shape="rag"]');
    await rag.locator('button[data-format="mooncake"]').click();
    await expect
      .poll(() => rag.locator('.copy-status').textContent(), { timeout: 5_000 })
      .toBe('Could not fetch the Mooncake trace: HTTP 404: no request of workload "rag" in the window reported both its input and output tokens.');
    expect(problems.filter((p) => !p.includes('status of 404'))).toEqual([]);
    await page.context().close();
  });

  it('shows the export selected for copying by hand when the browser refuses the clipboard', async () => {
    const context = await browser.newContext({ viewport: LAPTOP });
    await context.addInitScript(() => {
      Object.defineProperty(navigator, 'clipboard', { value: { writeText: () => Promise.reject(new Error('Write permission denied.')) } });
    });
    const page = await context.newPage();
    await page.goto(`${withProfiles.url}/`);
    const chat = page.locator('section[data-shape="chat"]');
    await chat.locator('button[data-format="mooncake"]:enabled').click();
    await chat.locator('textarea.copy-fallback').waitFor({ timeout: 5_000 });
    expect(await chat.locator('textarea.copy-fallback').inputValue()).toBe(exportText('chat', 'mooncake'));
    expect(await chat.locator('.copy-status').textContent()).toBe('The browser allowed no clipboard (Write permission denied.): the Mooncake trace is selected below; copy it with Ctrl+C.');
    await context.close();
  });

  it.each([
    ['a laptop', LAPTOP],
    ['a phone', PHONE],
  ])('cuts off no text on %s', async (_name, viewport) => {
    for (const admin of [without, withProfiles]) {
      const { page } = await open(admin.url, viewport);
      expect(await shapeLayoutProblems(page)).toEqual([]);
      await page.context().close();
    }
  });
});
