import net from 'node:net';

/**
 * Which `Host` the admin listener answers (docs/security.md, "DNS rebinding"). A web page an SRE
 * opens while `kubectl port-forward` holds 127.0.0.1:9464 can rebind its own name to 127.0.0.1:
 * its script then reads the status page, /status.json, /metrics and /profile as same-origin
 * answers (a hostile review did, in Chromium, with `Host: rebind.example:9464`). The browser
 * always sends the page's own name as `Host`, and that name must be one the attacker can put in
 * public DNS. So the listener answers only names that public DNS cannot hold:
 *
 * - IP addresses (kubelet probes and Prometheus' pod and endpoint discovery send `<pod IP>:9464`);
 * - `localhost` and names under `.localhost` (RFC 6761 section 6.3; `kubectl port-forward`);
 * - single-label names (`llm-pod:9464`, a Docker Compose service, a Service in the same
 *   namespace): no public name has one label (ICANN SAC053);
 * - names under `.svc` (Kubernetes Service names, `name.namespace.svc`), `.local` (RFC 6762, and
 *   `cluster.local`), `.internal` (reserved for private use by ICANN in 2024) and `.home.arpa`
 *   (RFC 8375);
 * - and the names the operator lists in `admin_allowed_hosts` (an Ingress, a custom cluster
 *   domain): `name.example.com` exactly, or `.example.com` for every name under it.
 *
 * A request without `Host` (HTTP/1.0) comes from no browser, and is answered.
 */
const PRIVATE_SUFFIXES = ['.localhost', '.svc', '.local', '.internal', '.home.arpa'] as const;

export function allowedAdminHost(host: string | undefined, allowed: readonly string[] = []): boolean {
  if (host === undefined || host === '') return true;
  const name = hostName(host);
  if (name === undefined) return false;
  if (net.isIP(name) !== 0 || !name.includes('.')) return true;
  if (PRIVATE_SUFFIXES.some((suffix) => name.endsWith(suffix))) return true;
  return allowed.some((entry) => {
    const rule = entry.toLowerCase();
    return rule.startsWith('.') ? name.endsWith(rule) : name === rule;
  });
}

/** The name or address of a `Host` value, lower case, without port or trailing dot; undefined when it is no host at all. */
function hostName(host: string): string | undefined {
  const lower = host.toLowerCase();
  if (lower.startsWith('[')) {
    const address = /^\[([^\]]*)\](?::\d*)?$/.exec(lower)?.[1];
    return address !== undefined && net.isIPv6(address) ? address : undefined;
  }
  const match = /^([^:]*)(?::\d*)?$/.exec(lower);
  if (match === null) return undefined;
  const name = (match[1] as string).replace(/\.$/, '');
  return name === '' || name.startsWith('.') ? undefined : name;
}

/** The refusal's text: the Host, the rule and what to do. */
export function refusedHostMessage(host: string): string {
  return `Host ${JSON.stringify(host)} is not a name the admin listener answers to (DNS rebinding guard): an IP address, localhost, a single-label name or a name under ${PRIVATE_SUFFIXES.join(', ')} is; list any other name the admin port is reached by in admin_allowed_hosts (docs/security.md#dns-rebinding)`;
}
