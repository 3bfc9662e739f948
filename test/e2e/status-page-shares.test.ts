/// <reference lib="dom" />
import Fastify, { type FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerStatusRoutes } from '../../src/admin/status-routes.js';
import type { EventWindow, WorkloadStatus } from '../../src/admin/status-report.js';
import type { StatusSource } from '../../src/admin/status-source.js';
import { builtStatusReport, emptyLatency, quietWorkload } from '../helpers/built-status-report.js';
import { requireTool } from '../helpers/required-tools.js';

/**
 * How the status page prints shares beside an objective, in Chromium, from a report built here: an
 * objective as configured (99.95 % printed as 100.0 %), a share of good events below the objective
 * never printed as it (98.96 % of a 99 % objective printed as 99.0 %), and a few errors in many
 * thousands printed as more than none.
 */

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

function events(good: number, bad: number, objective: number): EventWindow {
  const burn = bad / (good + bad) / (1 - objective);
  return { good, bad, attainment: good / (good + bad), burn_rate: burn, error_budget_remaining: 1 - burn };
}

function workload(name: string, objective: number, window: EventWindow, errorRatio: number, lifetime = window): WorkloadStatus {
  return quietWorkload(name, {
    objective,
    state: 'burning',
    goodput_per_s: 1,
    goodput_ratio: window.attainment,
    error_ratio: errorRatio,
    slos: [{ slo: 'ttft', threshold_s: 0.2, state: 'burning', lifetime, window }],
    latency: { ttft: emptyLatency(0.2), itl: emptyLatency(), e2e: emptyLatency() },
  });
}

const REPORT = builtStatusReport([
  // 98.96 % good against 99 %; one error in 5,000.
  workload('chat', 0.99, events(9896, 104, 0.99), 0.0002),
  // 99.94 % good against 99.95 %; since start, one bad event in 10 million (99.998 % of the budget left).
  workload('rag', 0.9995, events(19998, 12, 0.9995), 0, events(9_999_999, 1, 0.9995)),
]);

let browser: Browser;
let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  browser = await chromium.launch({ executablePath: requireTool('chromium'), args: CHROMIUM_ARGS });
  app = Fastify({ logger: false });
  registerStatusRoutes(app, { report: async () => REPORT, stop: () => undefined } as unknown as StatusSource);
  url = await app.listen({ host: '127.0.0.1', port: 0 });
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

async function text(page: Page, selector: string): Promise<string> {
  return ((await page.locator(selector).first().textContent()) ?? '').trim();
}

describe('the status page beside an objective, in Chromium', () => {
  it('prints the objective as configured, a good share below it rounded down to its decimals, budget left rounded down, and a few errors as more than none', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(`${url}/`);
    await page.waitForFunction(() => document.querySelector('article[data-workload="rag"] [data-field="attainment-window"]') !== null, undefined, { timeout: 10_000 });
    const card = (name: string, field: string) => `article[data-workload="${name}"] [data-field="${field}"]`;

    expect(await text(page, 'article[data-workload="chat"] header')).toContain('objective 99.0 % good');
    expect(await text(page, card('chat', 'attainment-window'))).toBe('98.9 %');
    expect(await text(page, card('chat', 'goodput'))).toBe('98.9 %');
    expect(await text(page, '#overview-body tr[data-workload="chat"] [data-field="goodput-ratio"]')).toBe('98.9 %');
    expect(await text(page, card('chat', 'error-ratio'))).toBe('< 0.1 %');
    expect(await text(page, '#overview-body tr[data-workload="chat"] [data-field="error-ratio"]')).toBe('< 0.1 %');

    expect(await text(page, 'article[data-workload="rag"] header')).toContain('objective 99.95 % good');
    expect(await text(page, card('rag', 'attainment-window'))).toBe('99.94 %');
    expect(await text(page, card('rag', 'error-ratio'))).toBe('0.0 %');
    // 12 bad of 20,010 against 0.05 %: 1.1994 of the budget burnt, none left.
    expect(await text(page, card('rag', 'budget-window'))).toBe('overspent');
    expect(await text(page, card('rag', 'budget-lifetime'))).toBe('99.9 %');
    expect(await text(page, card('rag', 'attainment-lifetime'))).toBe('99.99 %');
    // 104 bad of 10,000 against 1 %: 1.04 burnt.
    expect(await text(page, card('chat', 'budget-window'))).toBe('overspent');
    await page.context().close();
  });
});
