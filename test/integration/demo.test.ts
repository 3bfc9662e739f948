import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { scrape, sumValues } from '../helpers/prometheus-text.js';
import { eventually } from '../helpers/sidecar.js';

function memoryStream() {
  let text = '';
  return { stream: { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream, text: () => text };
}

describe('tokentap demo', () => {
  it('runs the example workloads: demo clients land in chat, rag and the others, with SLO events', async () => {
    const out = memoryStream();
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const running = main(['demo', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--upstream-port', '0', '--clients', '6'], {
      stdout: out.stream,
      stderr: memoryStream().stream,
      env: {},
      stopped,
    });
    try {
      const banner = await eventually('banner', () => out.text(), (t) => t.includes('Ctrl-C stops'), 15_000);
      expect(banner).toMatch(/workloads +rag, summarisation, code, chat, default +\(.*deploy\/tokentap\.yaml\)/);
      const admin = /metrics +(http:\/\/\S+)\/metrics/.exec(banner)![1]!;
      // The status page's URL is the very first thing printed, and it serves the page.
      expect(banner.split('\n')[0]).toBe(`tokentap demo: open ${admin}/ in a browser for the live status page`);
      const page = await fetch(`${admin}/`);
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(await page.text()).toContain('<title>tokentap status</title>');
      const events = (m: Awaited<ReturnType<typeof scrape>>, workload: string) => sumValues(m, 'tokentap_slo_events_total', { workload, slo: 'ttft' });
      const m = await eventually('SLO events for chat and rag', () => scrape(admin), (x) => events(x, 'chat') > 0 && events(x, 'rag') > 0, 20_000);
      expect(sumValues(m, 'tokentap_slo_events_total', { workload: 'default' })).toBe(0);
    } finally {
      stop();
      expect(await running).toBe(0);
    }
  }, 40_000);
});
