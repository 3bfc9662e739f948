import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { nodeVersionProblem } from '../../../bin/node-version-check.js';

/**
 * The Node versions package.json's `engines` admits are the ones every installed dependency admits
 * too: `npm ci` on Node 20 warned EBADENGINE because light-my-request 6.8 (fastify's, for
 * `inject()`) brought cookie 2, which declares node >=22; light-my-request is pinned by `overrides`
 * to 6.6.0, whose cookie 1 declares >=18.
 */

const PACKAGE = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
const LOCK = JSON.parse(readFileSync(new URL('../../../package-lock.json', import.meta.url), 'utf8')) as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };
const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The lowest version of each range in `engines` (`^20.19.0 || >=22.13.0`: 20.19.0 and 22.13.0). */
const LOWEST = new semver.Range(PACKAGE.engines.node).set.map((comparators) => semver.minVersion(comparators.map((c) => c.value).join(' '))?.version as string);

describe('engines in package.json', () => {
  it('admits no Node version a locked dependency refuses (npm ci on Node 20 warned EBADENGINE: cookie@2 wants >=22)', () => {
    expect(LOWEST.length).toBeGreaterThan(0);
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(LOCK.packages)) {
      const wanted = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (path === '' || wanted === undefined) continue;
      for (const lowest of LOWEST) if (!semver.satisfies(lowest, wanted)) refusing.push(`${path}@${entry.version}: node ${wanted} refuses ${lowest}`);
    }
    expect(refusing).toEqual([]);
  });

  it('admits the Node running these tests (CI: 20 and 24) and the container image\'s', () => {
    expect(semver.satisfies(process.version, PACKAGE.engines.node)).toBe(true);
    const image = /^FROM node:(\d+\.\d+\.\d+)/m.exec(readFileSync(new URL('../../../Dockerfile', import.meta.url), 'utf8'))?.[1];
    expect(image).toBeDefined();
    expect(semver.satisfies(image as string, PACKAGE.engines.node)).toBe(true);
  });

  it('is what the README\'s prerequisites say', () => {
    expect(README).toContain(`Node.js \`${PACKAGE.engines.node}\``);
  });

  it('is enforced at start: the launcher refuses Node 18 and the versions outside the ranges, naming what it needs (on Node 18 every request logged a TypeError), and admits the rest', () => {
    const root = fileURLToPath(new URL('../../../', import.meta.url));
    expect(nodeVersionProblem(root, '18.20.8')).toBe(
      `Node.js 18.20.8 cannot run tokentap: it needs ${PACKAGE.engines.node} (package.json "engines", the README's prerequisites). Install a supported Node.js (the current LTS, 24, is what CI and the container image run), then start again`,
    );
    for (const refused of ['20.18.3', '21.7.3', '22.12.0']) expect(nodeVersionProblem(root, refused), refused).toMatch(/^Node\.js \S+ cannot run tokentap/);
    for (const admitted of [...LOWEST, process.versions.node, '24.21.0', '25.0.0-nightly20260101abcdef']) expect(nodeVersionProblem(root, admitted), admitted).toBeUndefined();
  });
});
