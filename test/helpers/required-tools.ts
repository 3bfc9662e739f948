import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The real tools the suite drives, with the Debian package of each (.ci/run installs them all).
 * A test that needs one calls requireTools first, so a machine without it fails with what to
 * install rather than `expected '' to match /SUCCESS/` (promtool missing: empty output).
 */
const TOOLS = {
  promtool: { command: 'promtool', package: 'prometheus' },
  prometheus: { command: 'prometheus', package: 'prometheus' },
  amtool: { command: 'amtool', package: 'prometheus-alertmanager' },
  // Debian's name for the alertmanager binary.
  alertmanager: { command: 'prometheus-alertmanager', package: 'prometheus-alertmanager' },
  nginx: { command: 'nginx', package: 'nginx' },
  chromium: { command: 'chromium', package: 'chromium' },
  curl: { command: 'curl', package: 'curl' },
} as const;

export type ToolName = keyof typeof TOOLS;

/** Every tool the suite drives, in one command. */
export const INSTALL_EVERY_TOOL = `apt-get install ${[...new Set(Object.values(TOOLS).map((tool) => tool.package))].join(' ')}`;

/** PATH, then where Debian installs binaries (nginx is in /usr/sbin, which a user's PATH often lacks). */
function defaultDirectories(): string[] {
  return [...(process.env['PATH'] ?? '').split(delimiter).filter((dir) => dir !== ''), '/usr/bin', '/usr/sbin'];
}

/** The absolute path of `name`'s binary; throws, saying what to install, when it is in none of `directories`. */
export function requireTool(name: ToolName, directories: readonly string[] = defaultDirectories()): string {
  const tool = TOOLS[name];
  for (const dir of directories) {
    const candidate = join(dir, tool.command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here: the next directory.
    }
  }
  throw new Error(
    `${tool.command} is not installed (searched ${directories.join(delimiter) || 'no directory'}): this test drives the real ${name}. ` +
      `Install it with \`apt-get install ${tool.package}\` (every tool of the suite: \`${INSTALL_EVERY_TOOL}\`, as .ci/run does)`,
  );
}

/** requireTool for each; for a beforeAll, so every test of the file fails with the message. */
export function requireTools(...names: ToolName[]): void {
  for (const name of names) requireTool(name);
}
