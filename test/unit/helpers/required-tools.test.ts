import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { INSTALL_EVERY_TOOL, requireTool } from '../../helpers/required-tools.js';

/** The suite failed with `expected '' to match /SUCCESS/` on a machine without promtool: it must say what to install. */
describe('a test that needs a real tool', () => {
  const empty = mkdtempSync(join(tmpdir(), 'tokentap-no-tools-'));

  it.each([
    ['promtool', 'prometheus'],
    ['prometheus', 'prometheus'],
    ['amtool', 'prometheus-alertmanager'],
    ['alertmanager', 'prometheus-alertmanager'],
    ['nginx', 'nginx'],
    ['chromium', 'chromium'],
    ['curl', 'curl'],
  ] as const)('fails without %s, saying to apt-get install %s and naming every tool of the suite', (tool, pkg) => {
    expect(() => requireTool(tool, [empty])).toThrow(`Install it with \`apt-get install ${pkg}\``);
    expect(() => requireTool(tool, [empty])).toThrow('apt-get install prometheus prometheus-alertmanager nginx chromium curl');
  });

  it('names the same packages as .ci/run installs', async () => {
    const ci = (await import('node:fs')).readFileSync(new URL('../../../.ci/run', import.meta.url), 'utf8');
    const packages = /apt-get install -y --no-install-recommends (.+)$/m.exec(ci)?.[1]?.split(' ').sort();
    expect(INSTALL_EVERY_TOOL.replace('apt-get install ', '').split(' ').sort()).toEqual(packages);
  });

  it('is the command docs/testing.md and the README give', async () => {
    const { readFileSync } = await import('node:fs');
    const testing = readFileSync(new URL('../../../docs/testing.md', import.meta.url), 'utf8');
    expect(/```sh\n(apt-get install [^\n]+)\n```/.exec(testing)?.[1]).toBe(INSTALL_EVERY_TOOL);
    expect(readFileSync(new URL('../../../README.md', import.meta.url), 'utf8').replace(/\s+/g, ' ')).toContain(INSTALL_EVERY_TOOL);
  });

  it('finds a tool that is installed (this machine has promtool, as CI does)', () => {
    expect(requireTool('promtool')).toMatch(/\/promtool$/);
  });
});
