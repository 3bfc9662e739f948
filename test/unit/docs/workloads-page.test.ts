import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { fencedBlocks, readDoc } from '../../helpers/docs.js';
import { problemsOf } from '../../helpers/problems.js';

const page = readDoc('docs/workloads-and-slos.md');

/**
 * A file that makes each message the page's Validation section shows, so every line there is one
 * `tokentap check` prints, word for word.
 */
const FILES: Readonly<Record<string, string>> = {
  'duplicate name': 'workloads:\n  - name: chat\n    match: { path: /a }\n  - name: chat\n',
  'catch-all first': 'workloads:\n  - name: everything\n  - name: chat\n    match: { path: /a }\n',
  'not a duration': 'workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n      ttft: fast\n',
  'days': 'workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n      e2e: 1d\n',
  'objective 1': 'workloads:\n  - name: chat\n    slo:\n      objective: 1\n      ttft: 200ms\n',
  'no objective': 'workloads:\n  - name: chat\n    slo:\n      ttft: 200ms\n',
  'no threshold': 'workloads:\n  - name: chat\n    slo:\n      objective: 0.99\n',
  'empty match': 'workloads:\n  - name: chat\n    match: {}\n  - name: default\n',
  'star inside': 'workloads:\n  - name: chat\n    match:\n      path: /v1/*/completions\n',
  'query string': 'workloads:\n  - name: chat\n    match:\n      path: /v1/chat/completions?api-version=2024-06-01\n',
  'number header': 'workloads:\n  - name: chat\n    match:\n      header: { x-tier: 1 }\n',
  'spaced header': 'workloads:\n  - name: chat\n    match:\n      header: { x-workload: "chat " }\n',
  'wide header': 'workloads:\n  - name: chat\n    match:\n      header: { x-team: "日本" }\n',
  'header twice': 'workloads:\n  - name: chat\n    match:\n      header: { X-Workload: chat, x-workload: rag }\n',
  'misspelt key': 'workloads:\n  - name: chat\n    match:\n      path: /v1/chat/completions\n      headers: { x-workload: chat }\n',
  'shadowed': 'workloads:\n  - name: v1\n    match: { path: /v1/* }\n  - name: chat\n    match: { path: /v1/chat/completions }\n  - name: default\n',
};

describe('docs/workloads-and-slos.md', () => {
  it('shows in its Validation section only messages tokentap check prints, each as it prints it', () => {
    const section = page.slice(page.indexOf('## Validation'));
    const lines = (fencedBlocks(section, '')[0] ?? '').trimEnd().split('\n');
    const printed = new Set(Object.values(FILES).flatMap((yaml) => problemsOf(() => loadSettings({ flags: { config: 'tokentap.yaml' }, env: {}, readFile: () => yaml }))));
    expect(lines.length).toBeGreaterThan(10);
    expect(lines.filter((line) => !printed.has(line))).toEqual([]);
    expect([...printed].filter((line) => !lines.includes(line))).toEqual([]);
  });
});
