import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { schemaProblems } from './kube-schema.js';
import { defaultContainerProblems, restrictedProblems, scrapeJobProblems } from './pod-promises.js';
import { collectObjects, REPO, type LoadedObject } from './kustomize-tree.js';
import {
  podMonitorProblems,
  podProblems,
  serviceProblems,
  settingsProblems,
  sidecarOf,
  type ConfigSource,
  type DeploymentLike,
  type PodMonitorLike,
  type ServiceLike,
} from './pod-wiring.js';

/**
 * The Kubernetes manifests under deploy/kubernetes, read as files (no kustomize needed): each
 * variant's objects validate against the Kubernetes and prometheus-operator schemas, and the pod's
 * wiring holds (ports, probes, config, shutdown arithmetic). Every check is also run against a
 * deliberately broken copy, to show it catches what it claims to.
 */

const VARIANTS = ['native-sidecar', 'second-container'] as const;
const variantDir = (variant: string) => path.join(REPO, 'deploy/kubernetes/variants', variant);
/**
 * The longest stop of each variant (docs/kubernetes.md, "Graceful shutdown"): native, preStop 10 +
 * vLLM's drain 60 + engine exit 5 + the sidecar's drain 10 + final scrape wait 15 + flush 10;
 * second container, preStop 10 + drain 70 + final scrape wait 15 + flush 10. Both pods allow 115.
 */
const NEEDED_S = { 'native-sidecar': 110, 'second-container': 105 } as const;
const GRACE_S = 115;
/** The timing table of docs/kubernetes.md's "Graceful shutdown" section. */
const SHUTDOWN_TABLE = (() => {
  const page = readFileSync(path.join(REPO, 'docs/kubernetes.md'), 'utf8');
  const section = page.slice(page.indexOf('### 8. Graceful shutdown'), page.indexOf('### 9.'));
  return section.split('\n').filter((line) => line.startsWith('|'));
})();

interface Bundle {
  readonly objects: LoadedObject[];
  readonly deployment: DeploymentLike;
  readonly service: ServiceLike;
  readonly podMonitor: PodMonitorLike;
  readonly configMaps: Map<string, ConfigSource>;
}

function bundleOf(objects: LoadedObject[]): Bundle {
  const one = <T>(kind: string): T => {
    const found = objects.filter((o) => o.object['kind'] === kind);
    expect(found.map((o) => o.file), `exactly one ${kind}`).toHaveLength(1);
    return structuredClone(found[0]?.object) as T;
  };
  const configMaps = new Map<string, ConfigSource>();
  for (const { object, file } of objects) {
    if (object['kind'] === 'ConfigMap') {
      configMaps.set((object['metadata'] as { name: string }).name, { data: object['data'] as Record<string, string>, where: file });
    }
  }
  return { objects, deployment: one('Deployment'), service: one('Service'), podMonitor: one('PodMonitor'), configMaps };
}

function wiringProblems(bundle: Bundle): string[] {
  const where = bundle.deployment.metadata.name;
  return [
    ...podProblems(bundle.deployment, where),
    ...settingsProblems(bundle.deployment, bundle.configMaps, bundle.podMonitor, where),
    ...serviceProblems(bundle.service, bundle.deployment, where),
    ...podMonitorProblems(bundle.podMonitor, bundle.deployment, where),
    ...promiseProblems(bundle, where),
  ];
}

/** Pod Security "restricted" for every container's securityContext the manifests set, vLLM the default container, the sidecar's fixed scrape job. */
function promiseProblems(bundle: Bundle, where: string): string[] {
  type Pod = Parameters<typeof restrictedProblems>[0];
  const pod = bundle.deployment.spec.template.spec as unknown as Pod;
  const tokentap = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === 'tokentap');
  const annotations = (bundle.deployment.spec.template.metadata as { annotations?: Record<string, string> }).annotations;
  return [
    ...(tokentap === undefined ? [] : restrictedProblems(pod, tokentap, where)),
    ...defaultContainerProblems(annotations, pod, 'vllm', where),
    ...scrapeJobProblems(bundle.podMonitor.spec.podMetricsEndpoints, where),
  ];
}

const sidecar = (b: Bundle) => sidecarOf(b.deployment.spec.template.spec)?.container as NonNullable<ReturnType<typeof sidecarOf>>['container'];
const server = (b: Bundle) => b.deployment.spec.template.spec.containers.find((c) => c.name === 'vllm') as ReturnType<typeof sidecar>;

describe.each(VARIANTS)('the %s variant', (variant) => {
  const bundle = () => bundleOf(collectObjects(variantDir(variant)));

  it('holds only objects that validate against the Kubernetes and prometheus-operator schemas', () => {
    const { objects } = bundle();
    expect(objects.map((o) => `${String(o.object['kind'])}`).sort()).toEqual(['ConfigMap', 'Deployment', 'PodMonitor', 'Service']);
    expect(objects.flatMap((o) => schemaProblems(o.object, o.file))).toEqual([]);
  });

  it('wires the Service, the probes, the PodMonitor, the config and the shutdown timings consistently', () => {
    expect(wiringProblems(bundle())).toEqual([]);
  });

  it('places tokentap as the variant says', () => {
    const b = bundle();
    const placement = sidecarOf(b.deployment.spec.template.spec);
    expect(placement?.native).toBe(variant === 'native-sidecar');
    if (variant === 'native-sidecar') expect(placement?.container.restartPolicy).toBe('Always');
  });

  it('catches a Service whose targetPort names a port no container declares', () => {
    const b = bundle();
    (b.service.spec.ports[0] as { targetPort: string }).targetPort = 'proxy';
    expect(wiringProblems(b)).toEqual([expect.stringContaining('targets proxy, which no container declares')]);
  });

  it('catches a Service that bypasses the sidecar', () => {
    const b = bundle();
    server(b).ports = [{ name: 'vllm', containerPort: 8000 }];
    (b.service.spec.ports[0] as { targetPort: string }).targetPort = 'vllm';
    expect(wiringProblems(b)).toContainEqual(expect.stringContaining(`targets vllm's vllm, not the sidecar's proxy port "http"`));
  });

  it('catches a PodMonitor on a port name no container declares', () => {
    const b = bundle();
    (b.podMonitor.spec.podMetricsEndpoints[0] as { port: string }).port = 'metric';
    expect(wiringProblems(b)).toEqual([expect.stringContaining('scrapes port "metric", which no container declares')]);
  });

  it('catches a probe on a port name the probed container does not declare', () => {
    const b = bundle();
    (sidecar(b).readinessProbe as { httpGet: { port: string } }).httpGet.port = 'admin';
    expect(wiringProblems(b)).toContainEqual(expect.stringContaining('readinessProbe: port "admin" is not a port this container declares'));
  });

  it('catches a probe on a path the admin listener does not serve', () => {
    const b = bundle();
    (server(b).startupProbe as { httpGet: { path: string } }).httpGet.path = '/health';
    expect(wiringProblems(b)).toEqual([expect.stringContaining('startupProbe: /health is not an admin endpoint')]);
  });

  it('catches a config whose listen port is not the container port', () => {
    const b = bundle();
    sidecar(b).env?.push({ name: 'TOKENTAP_LISTEN', value: '0.0.0.0:8081' });
    expect(wiringProblems(b)).toEqual([expect.stringContaining('tokentap listens on 8081, its "http" port is 8080')]);
  });

  it('catches an upstream that is not where vLLM listens', () => {
    const b = bundle();
    server(b).args = (server(b).args ?? []).map((arg) => (arg === '--port=8000' ? '--port=8001' : arg));
    expect(wiringProblems(b)).toEqual([expect.stringContaining("tokentap's upstream is 127.0.0.1:8000, vllm listens on 127.0.0.1:8001")]);
  });

  it('catches a config tokentap refuses, with its own error', () => {
    const b = bundle();
    const [name, source] = [...b.configMaps].find(([, s]) => 'tokentap.yaml' in s.data) as [string, ConfigSource];
    b.configMaps.set(name, { ...source, data: { 'tokentap.yaml': 'upstream_idle_timeout: soon\n' } });
    expect(wiringProblems(b)).toEqual([expect.stringMatching(/tokentap refuses the config [\s\S]*tokentap.yaml:1: upstream_idle_timeout: expected a positive duration/)]);
  });

  it('catches a grace period shorter than the shutdown it must cover', () => {
    const b = bundle();
    b.deployment.spec.template.spec.terminationGracePeriodSeconds = 60;
    expect(wiringProblems(b)).toEqual([expect.stringMatching(/terminationGracePeriodSeconds 60 < \d+ s needed/)]);
    server(b).args = (server(b).args ?? []).filter((arg) => !arg.startsWith('--shutdown-timeout'));
    expect(wiringProblems(b)).toContainEqual(expect.stringContaining('vllm has no --shutdown-timeout'));
  });

  it('waits for one more scrape after the drain, and raises the grace period by as much', () => {
    const b = bundle();
    const waitS = Number.parseInt(sidecar(b).env?.find((v) => v.name === 'TOKENTAP_FINAL_SCRAPE_WAIT')?.value ?? '0', 10);
    expect(`${waitS}s`).toBe(b.podMonitor.spec.podMetricsEndpoints[0]?.interval);
    b.deployment.spec.template.spec.terminationGracePeriodSeconds = GRACE_S - waitS;
    expect(wiringProblems(b)).toEqual([`llm: terminationGracePeriodSeconds ${GRACE_S - waitS} < ${NEEDED_S[variant]} s needed (preStop + vllm drain + engine exit + sidecar drain + final scrape wait + flush)`]);
  });

  it('catches a sidecar that stops before the PodMonitor can scrape what the drain finished', () => {
    const b = bundle();
    sidecar(b).env = sidecar(b).env?.filter((v) => v.name !== 'TOKENTAP_FINAL_SCRAPE_WAIT');
    expect(wiringProblems(b)).toEqual([expect.stringContaining("final_scrape_wait 0 s is shorter than the PodMonitor's interval (15 s)")]);
  });

  it('states the shutdown budget docs/kubernetes.md section 8 gives', () => {
    const b = bundle();
    b.deployment.spec.template.spec.terminationGracePeriodSeconds = 1;
    const needed = Number(/< (\d+) s needed/.exec(wiringProblems(b).join('\n'))?.[1]);
    expect(needed).toBe(NEEDED_S[variant]);
    const column = VARIANTS.indexOf(variant) + 2;
    const row = (label: string) => SHUTDOWN_TABLE.find((line) => line.startsWith(`| ${label} |`))?.split('|')[column]?.trim();
    expect(row('worst case')).toMatch(new RegExp(`= ${needed} s$`));
    expect(row('`terminationGracePeriodSeconds`')).toBe(String(GRACE_S));
  });

  it('catches an environment variable that refers to one defined after it', () => {
    const b = bundle();
    const env = sidecar(b).env ?? [];
    const attributes = env.findIndex((v) => v.name === 'OTEL_RESOURCE_ATTRIBUTES');
    env.push(...env.splice(env.findIndex((v) => v.name === 'POD_NAME'), 1));
    expect(attributes).toBeGreaterThan(-1);
    expect(wiringProblems(b)).toEqual([expect.stringContaining('refers to $(POD_NAME), which is not defined before it')]);
  });

  it('catches a sidecar that Pod Security "restricted" would refuse, a default container other than vLLM, and the default scrape job', () => {
    const b = bundle();
    const pod = b.deployment.spec.template.spec as unknown as { securityContext?: Record<string, unknown> };
    delete pod.securityContext;
    (sidecar(b) as { securityContext?: { allowPrivilegeEscalation?: boolean } }).securityContext = { allowPrivilegeEscalation: true };
    (b.deployment.spec.template.metadata as { annotations?: Record<string, string> }).annotations = { 'kubectl.kubernetes.io/default-container': 'tokentap' };
    delete (b.podMonitor.spec.podMetricsEndpoints[0] as { relabelings?: unknown }).relabelings;
    expect(wiringProblems(b)).toEqual([
      `${b.deployment.metadata.name}: container tokentap must set allowPrivilegeEscalation: false`,
      `${b.deployment.metadata.name}: container tokentap must run with runAsNonRoot: true`,
      `${b.deployment.metadata.name}: container tokentap must drop ALL capabilities`,
      `${b.deployment.metadata.name}: container tokentap needs seccompProfile RuntimeDefault (or Localhost), on the container or the pod; has none`,
      `${b.deployment.metadata.name}: kubectl would pick container tokentap without -c (annotation kubectl.kubernetes.io/default-container), not the engine vllm`,
      `${b.deployment.metadata.name}: the PodMonitor endpoint metrics gives job=<namespace>/<PodMonitor name> (the default), not tokentap`,
    ]);
  });

  it('catches a misspelt field that the schema alone would let through', () => {
    const b = bundle();
    const spec = b.deployment.spec.template.spec as unknown as Record<string, unknown>;
    spec['terminationGracePeriodSecond'] = spec['terminationGracePeriodSeconds'];
    expect(schemaProblems(b.deployment, 'deployment.yaml')).toEqual([expect.stringContaining('unknown field /spec/template/spec/terminationGracePeriodSecond')]);
  });

  it('catches a value of the wrong type and a kind it has no schema for', () => {
    const b = bundle();
    (sidecar(b).ports?.[0] as { containerPort: unknown }).containerPort = '8080';
    expect(schemaProblems(b.deployment, 'deployment.yaml')).toEqual([expect.stringContaining('containerPort must be integer')]);
    expect(schemaProblems({ apiVersion: 'monitoring.coreos.com/v1', kind: 'ServiceMonitr', metadata: { name: 'x' } }, 'x.yaml')).toEqual([
      expect.stringContaining('unknown kind monitoring.coreos.com/v1/ServiceMonitr'),
    ]);
  });
});

describe('the native sidecar', () => {
  const bundle = () => bundleOf(collectObjects(variantDir('native-sidecar')));

  it('is caught when it is a plain init container, which would block vLLM from starting', () => {
    const b = bundle();
    delete sidecar(b).restartPolicy;
    expect(wiringProblems(b)).toEqual([expect.stringContaining('needs restartPolicy: Always')]);
  });

  it('is caught when the Service names its port, which Kubernetes 1.29 to 1.32 never resolve', () => {
    const b = bundle();
    (b.service.spec.ports[0] as { targetPort: string }).targetPort = 'http';
    expect(wiringProblems(b)).toEqual(['llm: Service llm port http targets the native sidecar\'s port by its name "http", which Kubernetes 1.29 to 1.32 never resolve (kubernetes/kubernetes#128850): use the number 8080']);
  });

  it('is caught when its startup probe waits for the upstream it is started before', () => {
    const b = bundle();
    (sidecar(b).startupProbe as { httpGet: { path: string } }).httpGet.path = '/readyz';
    expect(wiringProblems(b)).toEqual([expect.stringContaining("startupProbe asks /readyz, which waits for vllm")]);
  });
});

describe('the second-container variant', () => {
  it('is caught when its drain would cut streams vLLM is still finishing', () => {
    const b = bundleOf(collectObjects(variantDir('second-container')));
    (sidecar(b).env?.find((v) => v.name === 'TOKENTAP_DRAIN_TIMEOUT') as { value: string }).value = '30s';
    expect(wiringProblems(b)).toEqual([expect.stringContaining('drain_timeout 30 s is shorter than vllm\'s drain')]);
  });

  it('is the native pod with only the documented differences', () => {
    const native = bundleOf(collectObjects(variantDir('native-sidecar'))).deployment;
    const plain = bundleOf(collectObjects(variantDir('second-container'))).deployment;
    // Turn the native pod into what the second-container comment says it differs by.
    const expected = structuredClone(native);
    const pod = expected.spec.template.spec;
    const tokentap = pod.initContainers?.find((c) => c.name === 'tokentap');
    expect(tokentap).toBeDefined();
    delete pod.initContainers;
    delete tokentap?.restartPolicy;
    const plainTokentap = plain.spec.template.spec.containers.find((c) => c.name === 'tokentap');
    (tokentap as NonNullable<typeof tokentap>).lifecycle = plainTokentap?.lifecycle;
    const drain = (c: typeof tokentap) => c?.env?.find((v) => v.name === 'TOKENTAP_DRAIN_TIMEOUT');
    (drain(tokentap) as { value: string }).value = drain(plainTokentap)?.value as string;
    pod.containers.push(tokentap as NonNullable<typeof tokentap>);
    expect(plain).toEqual(expected);
    expect(plainTokentap?.lifecycle?.preStop).toBeDefined();
  });
});

describe('the workloads config in the ConfigMap', () => {
  it('is the same file as deploy/tokentap.yaml, which the rules and dashboards are rendered from', () => {
    const copy = readFileSync(path.join(REPO, 'deploy/kubernetes/base/tokentap.yaml'), 'utf8');
    const source = readFileSync(path.join(REPO, 'deploy/tokentap.yaml'), 'utf8');
    expect(copy, 'run `npm run render:example` (it also copies the config into deploy/kubernetes/base)').toBe(source);
  });
});
