import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { fakeAdmin, type FakeAdmin } from './fake-admin.js';
import { distribution, workloadProfile } from './workload-profiles.js';

/**
 * The `tokentap profile compare` commands of README.md and docs/workload-profiles.md, run as the
 * pages show them: only the admin URL is pointed at this test's stand-in admin listener, and
 * `benchmarks.json` is the real GuideLLM report of test/fixtures/benchmarks/guidellm/.
 */

const REPO = join(import.meta.dirname, '..', '..', '..');
const GUIDELLM_JSON = join(REPO, 'test', 'fixtures', 'benchmarks', 'guidellm', 'benchmarks_stripped.json');

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { streams: { stdout, stderr, env: {} }, out: () => out, err: () => err };
}

/** The fenced blocks of a Markdown text, in order. */
function fencedBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^ *```[a-z]*\n([\s\S]*?)^ *```$/gm)].map((m) => (m[1] as string).split('\n').map((line) => line.trim()).join('\n'));
}

/** A command line of a page as arguments for main(): the launcher dropped, the admin URL and result file swapped. */
function asArguments(line: string, admin: string, result: string): string[] {
  const words = line.trim().split(/\s+/);
  const start = words.indexOf('profile');
  expect(start, `no "profile" command in: ${line}`).toBeGreaterThanOrEqual(0);
  const args = words.slice(start);
  expect(args[args.indexOf('--admin') + 1]).toBe('http://127.0.0.1:9464');
  args[args.indexOf('--admin') + 1] = admin;
  expect(args[args.indexOf('--result') + 1]).toBe('benchmarks.json');
  args[args.indexOf('--result') + 1] = result;
  return args;
}

let admin: FakeAdmin;
let dir: string;
let result: string;
beforeAll(async () => {
  admin = await fakeAdmin();
  // Production as the page's example output shows it.
  admin.profiles.set('chat', workloadProfile({
    inputTokens: distribution(3600, 820, 700, 610, 3000),
    outputTokens: distribution(3600, 190, 140, 150, 650),
    arrivals: { ratePerSecond: 1, interArrivalCv: 2.2, gammaShape: 0.21 },
    cachedInputShare: 0.4,
    prefixSharing: { blockTokens: 512, sharedPrefixShare: 0.5, sharedBlockShare: 0.3 },
  }));
  dir = await mkdtemp(join(tmpdir(), 'tokentap-compare-docs-'));
  result = join(dir, 'benchmarks.json');
  await copyFile(GUIDELLM_JSON, result);
});
afterAll(async () => {
  await admin.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the profile compare commands of the docs, as written', () => {
  it("docs/workload-profiles.md: its command prints every line of the page's example output and exits 1", async () => {
    const page = await readFile(join(REPO, 'docs', 'workload-profiles.md'), 'utf8');
    const section = page.slice(page.indexOf('## Comparing a benchmark with production'));
    const [command, output] = fencedBlocks(section);
    const console = io();
    const code = await main(asArguments(command as string, admin.url, result), console.streams);
    expect(console.err()).toBe('');
    expect(code).toBe(1);
    const printed = console.out().split('\n').map((line) => line.trim());
    const shown = (output as string).split('\n').filter((line) => line !== '' && !line.startsWith('...'));
    expect(shown.length).toBeGreaterThan(10);
    for (const line of shown) expect(printed).toContain(line.replace(' in benchmarks.json', ` in ${result}`));
  });

  it("README.md: the loop's compare step runs and prints the side-by-side table", async () => {
    const readme = await readFile(join(REPO, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Production traffic as a benchmark'));
    const command = fencedBlocks(section).find((block) => block.includes('profile compare')) as string;
    const console = io();
    const code = await main(asArguments(command, admin.url, result), console.streams);
    expect(console.err()).toBe('');
    expect(code).toBe(1);
    expect(console.out()).toMatch(/^Workload "chat" \(production, last 60 min\) against GuideLLM benchmark 0 of 1 \(synchronous\)/);
    expect(admin.asked).toContain('/profile/chat?format=json&window=1h');
  });
});
