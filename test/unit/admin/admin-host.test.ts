import { describe, expect, it } from 'vitest';
import { allowedAdminHost, refusedHostMessage } from '../../../src/admin/admin-host.js';

/**
 * The admin listener's Host rule (src/admin/admin-host.ts, docs/security.md "DNS rebinding"), value
 * by value; test/security/admin-listener.test.ts and test/e2e/admin-browser-guards.test.ts send
 * them to a listening server and from Chromium.
 */

describe('the Host the admin listener answers', () => {
  it.each([
    ['a pod IPv4 address with the port (kubelet, Prometheus pod discovery)', '10.244.1.17:9464'],
    ['an IPv4 address without port', '127.0.0.1'],
    ['a bracketed IPv6 address with the port', '[fd00::17]:9464'],
    ['a bracketed IPv6 address without port', '[::1]'],
    ['a bracketed IPv6 address with an empty port', '[::1]:'],
    ['localhost (kubectl port-forward)', 'localhost:9464'],
    ['localhost in capitals with a trailing dot', 'LOCALHOST.'],
    ['a name under .localhost', 'tokentap.localhost:9464'],
    ['a single-label name (a static scrape target, a Compose service)', 'llm-pod:9464'],
    ['a Service name under .svc', 'tokentap.llm-serving.svc:9464'],
    ['a Service name under .svc.cluster.local', 'tokentap.llm-serving.svc.cluster.local'],
    ['a name under .internal', 'gpu-box.internal'],
    ['a name under .home.arpa', 'router.home.arpa'],
    ['no Host at all (HTTP/1.0)', undefined],
    ['an empty Host', ''],
  ])('answers %s', (_what, host) => {
    expect(allowedAdminHost(host)).toBe(true);
  });

  it.each([
    ['a public name with the port (a rebound page)', 'rebind.example:9464'],
    ['a public name in capitals with a trailing dot', 'REBIND.EXAMPLE.'],
    ['a public name that spells an address', '127.0.0.1.nip.io'],
    ['a public name that starts like localhost', 'localhost.rebind.example'],
    ['a public name that ends in localhost without a dot before it', 'evillocalhost.example'],
    ['a public name with svc inside it', 'tokentap.svc.rebind.example'],
    ['a name ending in local without the dot before it', 'rebind.notlocal'],
    ['a name ending in svc without the dot before it', 'rebind.notsvc'],
    ['a name of dots only', '.'],
    ['a name starting with a dot', '.rebind.example'],
    ['an IPv6 address left unclosed', '[::1'],
    ['a bracketed name that is no address', '[rebind.example]:9464'],
    ['a bracketed address with text after it', '[::1]x'],
    ['a bracketed address with text after its port', '[::1]:9464x'],
    ['a bracketed address with text before its port', '[::1]x:9464'],
    ['a port that is not a number', 'llm-pod:x'],
    ['two colons outside brackets', 'a:1:2'],
  ])('refuses %s', (_what, host) => {
    expect(allowedAdminHost(host)).toBe(false);
  });

  it('answers a name admin_allowed_hosts lists exactly, and under an entry starting with a dot, in any case', () => {
    const allowed = ['Tokentap.Example.com', '.corp.example'];
    expect(allowedAdminHost('tokentap.example.com:443', allowed)).toBe(true);
    expect(allowedAdminHost('TOKENTAP.example.com', allowed)).toBe(true);
    expect(allowedAdminHost('gpu-1.corp.example', allowed)).toBe(true);
    expect(allowedAdminHost('a.b.corp.example:9464', allowed)).toBe(true);
    expect(allowedAdminHost('x.tokentap.example.com', allowed)).toBe(false);
    expect(allowedAdminHost('eviltokentap.example.com', allowed)).toBe(false);
    expect(allowedAdminHost('evilcorp.example', allowed)).toBe(false);
    expect(allowedAdminHost('corp.example.rebind.example', allowed)).toBe(false);
    // No host name starts with a dot, even one a listed suffix ends.
    expect(allowedAdminHost('.corp.example', allowed)).toBe(false);
  });

  it('says, on refusal, the Host, the rule and the setting to change', () => {
    const message = refusedHostMessage('rebind.example:9464');
    expect(message).toContain('"rebind.example:9464"');
    expect(message).toContain('an IP address, localhost, a single-label name or a name under .localhost, .svc, .local, .internal, .home.arpa');
    expect(message).toContain('admin_allowed_hosts');
  });
});
