import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { checkoutCommit } from './git-checkout-commit.js';

/**
 * What this build is, for `tokentap --version` and the tokentap_build_info gauge. The version is
 * package.json's, read once at start-up: package.json sits one level above dist/ and src/ both in
 * the repository and in the image (the Dockerfile copies it for its "type": "module").
 */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** The variable the image build sets from its COMMIT build argument (Dockerfile). */
export const COMMIT_ENV = 'TOKENTAP_COMMIT';

/** The directory holding package.json, src/ and dist/: a git checkout's root when run from one. */
const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The git commit this process runs: the image's (TOKENTAP_COMMIT, set from the build's COMMIT
 * argument), else the checkout's when run from a git checkout (`node bin/tokentap.js`, `npm start`),
 * else "unknown" (an image built without COMMIT, an install from a package). Called once at start-up.
 */
export function commitOf(env: Readonly<Record<string, string | undefined>>, root: string = PACKAGE_ROOT): string {
  const commit = env[COMMIT_ENV]?.trim();
  // A label value: keep it short and plain, whatever the build passed.
  if (commit !== undefined && /^[0-9A-Za-z._-]{1,64}$/.test(commit)) return commit;
  return checkoutCommit(root) ?? 'unknown';
}
