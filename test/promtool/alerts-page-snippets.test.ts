import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireTools } from '../helpers/required-tools.js';

/**
 * docs/alerts.md's Alertmanager merge as a user copies it: the "After" configuration is written to
 * alertmanager.yml exactly as the page shows it, and the page's own amtool commands are run on it.
 * A newcomer's reproduction: the page's receivers held `<ticket bridge>` and `<dead man's switch>`,
 * so the check the page tells you to run failed with `unsupported scheme "" for URL`.
 */
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const AMTOOL_TIMEOUT_MS = 60_000;

beforeAll(() => requireTools('amtool'));

function run(command: string, args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: AMTOOL_TIMEOUT_MS }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

/** The first ```yaml block after the line that starts with `lead`. */
function yamlBlockAfter(page: string, lead: string): string {
  const start = page.split('\n').findIndex((line) => line.startsWith(lead));
  expect(start, `docs/alerts.md has no line starting "${lead}"`).toBeGreaterThanOrEqual(0);
  const rest = page.split('\n').slice(start).join('\n');
  const block = /^```yaml\n([\s\S]*?)^```$/m.exec(rest)?.[1];
  expect(block, `no yaml block after "${lead}"`).toBeDefined();
  return block as string;
}

let page: string;
let dir: string;

beforeAll(async () => {
  page = await readFile(join(REPO, 'docs', 'alerts.md'), 'utf8');
  dir = await mkdtemp(join(tmpdir(), 'tokentap-alerts-page-'));
  await writeFile(join(dir, 'alertmanager.yml'), yamlBlockAfter(page, 'After (tokentap'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("docs/alerts.md's Alertmanager merge, copied as shown", { timeout: 2 * AMTOOL_TIMEOUT_MS }, () => {
  it('passes the amtool check-config the page tells you to run', async () => {
    const command = /Check the result with `(amtool check-config alertmanager\.yml)`/.exec(page)?.[1];
    expect(command).toBeDefined();
    const [tool, ...args] = (command as string).split(' ');
    const result = await run(tool as string, args, dir);
    expect(result.output).toContain('SUCCESS');
    expect(result.code, result.output).toBe(0);
  });

  it("routes the page's example alert to the receiver the page says amtool prints", async () => {
    const shown = /`(amtool config routes test --config\.file=alertmanager\.yml [^`]+)`\s*\(prints `([^`]+)`\)/.exec(page);
    expect(shown).not.toBeNull();
    const [tool, ...args] = (shown?.[1] as string).split(' ');
    const result = await run(tool as string, args, dir);
    expect(result.code, result.output).toBe(0);
    // amtool prints the receiver first, then may warn on the same stream.
    expect(result.output.split(/\n|Warning:/)[0]?.trim()).toBe(shown?.[2]);
  });
});
