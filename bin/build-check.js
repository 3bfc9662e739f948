// Whether the compiled CLI (dist/) can run as it stands. `npm start` runs bin/ directly instead of
// rebuilding first (the TypeScript build took 37 s to the banner on a busy 2-core machine, on every
// run), so a checkout whose src/ changed after the last `npm run build` is told so instead of
// running old code. Plain JavaScript with no dependency: it runs before dist/ is loaded.
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** A message saying what is wrong and what to run, or undefined when dist/ is there and current. */
export function buildProblem(root) {
  const main = path.join(root, 'dist', 'cli', 'main.js');
  if (!existsSync(main)) return 'dist/ is not built: run `npm run build` (`npm ci` runs it too), then start again';
  const src = path.join(root, 'src');
  // An install without sources (the container image, a package): dist/ is all there is.
  if (!existsSync(src)) return undefined;
  const changed = newerThan(src, statSync(main).mtimeMs);
  if (changed === undefined) return undefined;
  return `dist/ is older than src/ (${path.relative(root, changed)} changed after the last build): run \`npm run build\`, then start again`;
}

/** The first file under `dir` modified after `timeMs`, or undefined. About 150 files: a few milliseconds, once per start. */
function newerThan(dir, timeMs) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const found = newerThan(file, timeMs);
      if (found !== undefined) return found;
    } else if (statSync(file).mtimeMs > timeMs) {
      return file;
    }
  }
  return undefined;
}
