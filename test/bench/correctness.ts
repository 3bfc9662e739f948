import { createHash } from 'node:crypto';
import type { StreamResult } from './load.js';

/**
 * The bench's correctness checks: a proxy must hand the client exactly the upstream's bytes, and the
 * sidecar must count exactly the tokens that passed. A failed check fails the bench.
 */

/**
 * The response body with the one field that may legitimately differ between two runs of the same
 * seed blanked: `created` is the simulator's wall-clock second. Everything else (ids come from
 * x-request-id, text from x-sim-seed) must match byte for byte.
 */
export function normalisedBody(body: Buffer): Buffer {
  return Buffer.from(body.toString('latin1').replace(/"created":\d+/g, '"created":0'), 'latin1');
}

export function bodyDigest(body: Buffer): string {
  return createHash('sha256').update(normalisedBody(body)).digest('hex');
}

/** Problems found comparing a proxied run with the direct one (same seeds, same request ids); empty when identical. */
export function compareBodies(system: string, direct: StreamResult, proxied: StreamResult): string[] {
  const problems: string[] = [];
  if (direct.requests.length !== proxied.requests.length) {
    problems.push(`${system}: ${proxied.requests.length} requests against ${direct.requests.length} direct`);
    return problems;
  }
  direct.requests.forEach((expected, i) => {
    const got = proxied.requests[i]!;
    if (!expected.ok || expected.body === undefined) {
      problems.push(`direct request ${i} failed (status ${expected.status}): the reference run is broken`);
      return;
    }
    if (!got.ok || got.body === undefined) {
      problems.push(`${system}: request ${i} failed (status ${got.status}, ${got.tokens} tokens)`);
      return;
    }
    if (bodyDigest(expected.body) !== bodyDigest(got.body)) {
      problems.push(`${system}: request ${i} body differs from the direct one (${got.body.length} bytes against ${expected.body.length})`);
    }
  });
  return problems;
}
