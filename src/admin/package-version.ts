import { readFileSync } from 'node:fs';

/**
 * The `version` of tokentap's package.json, read once: the same relative path from src/admin and
 * dist/admin, and the container image copies package.json beside dist/ (Dockerfile). "unknown" if
 * it cannot be read, which only hides the version on the status page.
 */
export function packageVersion(): string {
  try {
    const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
    const version = (JSON.parse(text) as { version?: unknown }).version;
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}
