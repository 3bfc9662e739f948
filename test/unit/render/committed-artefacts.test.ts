import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { renderArtefacts } from '../../../src/render/artefacts.js';

/**
 * The rendered files committed for the example config must be what `tokentap render` writes today:
 * a change to the config, the metric definitions or a renderer without `npm run render:example`
 * fails here.
 */
const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const ROOTS = { out: join(REPO, 'deploy'), dashboards: join(REPO, 'grafana') } as const;

describe('committed rendered files', () => {
  const settings = loadSettings({ flags: { config: join(REPO, 'deploy', 'tokentap.yaml') }, env: {} });
  it.each(renderArtefacts(settings, { windowScale: 1 }).map((a) => [`${a.root === 'out' ? 'deploy' : 'grafana'}/${a.path}`, a] as const))(
    '%s is up to date (run `npm run render:example` if not)',
    async (_name, artefact) => {
      const committed = await readFile(join(ROOTS[artefact.root], artefact.path), 'utf8');
      expect(committed === artefact.content, `${artefact.path} differs from what tokentap render writes now; run npm run render:example`).toBe(true);
    },
  );
});
