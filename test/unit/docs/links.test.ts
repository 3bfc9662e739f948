import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkLink,
  checkMarkdownLinks,
  documentationFiles,
  headingSlugBase,
  markdownAnchors,
  markdownLinks,
} from '../../helpers/markdown-links.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

describe('links in README.md and docs/', () => {
  it('finds the README and the reference pages', () => {
    const files = documentationFiles(REPO);
    expect(files).toContain('README.md');
    expect(files).toContain('docs/configuration.md');
    expect(files).toContain('docs/metrics.md');
  });

  it('every relative link names an existing file and every anchor a heading of its target', () => {
    expect(checkMarkdownLinks(REPO, documentationFiles(REPO))).toEqual([]);
  });

  it('every runbook_url of the committed rules is the example runbook_base_url and a file of docs/runbooks', () => {
    // The rendered alerts link <alerts.runbook_base_url>/<runbook>.md, a copy of docs/runbooks/ the
    // team serves: check the file part against this repository, so moving documentation cannot strand an on-call engineer.
    const base = /^\s*runbook_base_url: (\S+)/m.exec(readFileSync(join(REPO, 'deploy', 'tokentap.yaml'), 'utf8'))?.[1] ?? '';
    expect(base).toMatch(/^https:\/\//);
    const rules = readFileSync(join(REPO, 'deploy', 'prometheus', 'rules.yaml'), 'utf8');
    const targets = [...new Set([...rules.matchAll(/runbook_url: (\S+)/g)].map((m) => m[1] ?? ''))];
    expect(targets.length).toBeGreaterThan(0);
    for (const target of targets) expect(target.startsWith(`${base}/`), target).toBe(true);
    const problems = targets.flatMap((target) => checkLink(REPO, 'README.md', `docs/runbooks/${target.slice(base.length + 1)}`, 'deploy/prometheus/rules.yaml'));
    expect(problems).toEqual([]);
  });
});

describe('GitHub heading anchors', () => {
  it.each([
    ['Quick start', 'quick-start'],
    ['The `alerts:` section', 'the-alerts-section'],
    ['`inject_usage`', 'inject_usage'],
    ['Metric: `tokentap_token_count_mismatches_total`', 'metric-tokentap_token_count_mismatches_total'],
    ['9. What the tests check', '9-what-the-tests-check'],
    ['1.29 – 1.32', '129--132'],
    [
      'Results (29 November 2026, `npm run bench -- --priority`, 20:21 UTC)',
      'results-29-november-2026-npm-run-bench------priority-2021-utc',
    ],
    ['`grafana/tokentap-slo-overview.json` (uid `tokentap-slo-overview`)', 'grafanatokentap-slo-overviewjson-uid-tokentap-slo-overview'],
    ['See [the docs](docs/x.md) *now*', 'see-the-docs-now'],
  ])('%s -> #%s', (heading, slug) => {
    expect(headingSlugBase(heading)).toBe(slug);
  });

  it('suffixes repeated headings -1, -2 in order, and ignores headings inside code fences', () => {
    const anchors = markdownAnchors(
      ['# Setup', '## Setup', '```sh', '# Setup (a shell comment)', '```', '### Setup', 'Title', '====='].join('\n'),
    );
    expect([...anchors]).toEqual(['setup', 'setup-1', 'setup-2', 'title']);
  });

  it('reads inline links and reference definitions, not code or comments', () => {
    const links = markdownLinks(
      [
        'See [a](a.md#x) and ![b](img/b.png "title").',
        'Not `[c](c.md)`, not <!-- [d](d.md) -->.',
        '```',
        '[e](e.md)',
        '```',
        '[f]: docs/f.md',
      ].join('\n'),
    );
    expect(links).toEqual([
      { line: 1, target: 'a.md#x' },
      { line: 1, target: 'img/b.png' },
      { line: 6, target: 'docs/f.md' },
    ]);
  });
});

describe('the link check on a small sample', () => {
  let root: string | undefined;
  afterEach(() => {
    if (root) rmSync(root, { recursive: true, force: true });
    root = undefined;
  });

  function sample(files: Record<string, string>): string {
    root = mkdtempSync(join(tmpdir(), 'tokentap-links-'));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    return root;
  }

  it('passes links that resolve, including a repeated heading and a link from docs/ back up', () => {
    const dir = sample({
      'README.md': '# Tool\n\n[Config](docs/config.md#limits-1) · [here](#tool) · [code](src/)\n',
      'docs/config.md': '# Config\n\n## Limits\n\n## Limits\n\n[back](../README.md#tool)\n',
      'src/main.ts': '',
    });
    expect(checkMarkdownLinks(dir, documentationFiles(dir))).toEqual([]);
  });

  it('reports a missing file, a missing anchor and a missing local anchor, each with file and line', () => {
    const dir = sample({
      'README.md': '# Tool\n\n[gone](docs/gone.md)\n[bad anchor](docs/config.md#limits-2)\n',
      'docs/config.md': '# Config\n\n## Limits\n\n## Limits\n\nSee [nowhere](#no-such-heading).\n',
    });
    expect(checkMarkdownLinks(dir, documentationFiles(dir))).toEqual([
      { where: 'README.md:3', target: 'docs/gone.md', problem: 'no such file: docs/gone.md' },
      {
        where: 'README.md:4',
        target: 'docs/config.md#limits-2',
        problem: 'no heading with anchor #limits-2 in docs/config.md',
      },
      {
        where: 'docs/config.md:7',
        target: '#no-such-heading',
        problem: 'no heading with anchor #no-such-heading in docs/config.md',
      },
    ]);
  });
});
