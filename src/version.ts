import { readFileSync } from 'node:fs';

/**
 * What this build is, for `tokentap --version` and the tokentap_build_info gauge. The version is
 * package.json's, read once at start-up: package.json sits one level above dist/ and src/ both in
 * the repository and in the image (the Dockerfile copies it for its "type": "module").
 */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** The variable the image build sets from its COMMIT build argument (Dockerfile). */
export const COMMIT_ENV = 'TOKENTAP_COMMIT';

/** The git commit the image was built from, or "unknown" (a checkout run with `node bin/tokentap.js`). */
export function commitOf(env: Readonly<Record<string, string | undefined>>): string {
  const commit = env[COMMIT_ENV]?.trim();
  // A label value: keep it short and plain, whatever the build passed.
  return commit !== undefined && /^[0-9A-Za-z._-]{1,64}$/.test(commit) ? commit : 'unknown';
}
