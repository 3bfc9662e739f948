// Whether the running Node can run tokentap: the range package.json's `engines` declares (the
// README's prerequisites). npm only warns about `engines` (EBADENGINE) and installs anyway; on
// Node 18 the demo then started and every request's monitoring failed with a stack trace per
// request ("model.isWellFormed is not a function": String.prototype.isWellFormed is Node 20's).
// So the launcher refuses to start instead, saying what to install. Plain JavaScript, run before
// dist/ is loaded; semver is the range parser npm itself uses.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import semver from 'semver';

/** A message saying which Node is needed, or undefined when `version` satisfies package.json's engines. */
export function nodeVersionProblem(root, version) {
  const wanted = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).engines.node;
  // A pre-release of a supported line (a nightly, an rc) runs as its release would.
  if (semver.satisfies(version, wanted, { includePrerelease: true })) return undefined;
  return `Node.js ${version} cannot run tokentap: it needs ${wanted} (package.json "engines", the README's prerequisites). Install a supported Node.js (the current LTS, 24, is what CI and the container image run), then start again`;
}
