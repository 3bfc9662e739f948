import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/config/load.js';
import { WorkloadMatcher } from '../../../src/slo/workload-matcher.js';

function matcherFor(yaml: string): WorkloadMatcher {
  return new WorkloadMatcher(loadSettings({ flags: { config: 'w.yaml' }, env: {}, readFile: () => yaml }).workloads);
}

const matcher = matcherFor(`
workloads:
  - name: chat
    match: { header: { X-Workload: chat } }
  - name: chat-path
    match: { path: /v1/chat/completions }
  - name: rag
    match: { header: { x-workload: rag, x-tenant: acme }, path: /v1/* }
  - name: code
    match: { model: coder-7b }
  - name: fallback
`);

const name = (headers: Record<string, string>, path: string, model?: string) => matcher.match(headers, path, model).name;

describe('workload matcher', () => {
  it('matches a header by name case-insensitively (Node lower-cases request header names) and value exactly', () => {
    expect(name({ 'x-workload': 'chat' }, '/anything')).toBe('chat');
    expect(name({ 'x-workload': 'Chat' }, '/anything')).toBe('fallback');
    expect(name({ 'x-workload': 'chat, chat' }, '/anything')).toBe('fallback');
  });

  it('matches an exact path without its query, and a prefix path ending in *', () => {
    expect(name({}, '/v1/chat/completions')).toBe('chat-path');
    expect(name({}, '/v1/chat/completions/')).toBe('fallback');
    expect(name({ 'x-workload': 'rag', 'x-tenant': 'acme' }, '/v1/embeddings')).toBe('rag');
    expect(name({ 'x-workload': 'rag', 'x-tenant': 'acme' }, '/v2/embeddings')).toBe('fallback');
  });

  it('requires every condition of a workload to hold', () => {
    expect(name({ 'x-workload': 'rag' }, '/v1/completions')).toBe('fallback');
    expect(name({ 'x-tenant': 'acme' }, '/v1/completions')).toBe('fallback');
  });

  it('matches the model named by the request body, and no model matches no model rule', () => {
    expect(name({}, '/v1/completions', 'coder-7b')).toBe('code');
    expect(name({}, '/v1/completions', 'coder-7b-instruct')).toBe('fallback');
    expect(name({}, '/v1/completions', undefined)).toBe('fallback');
  });

  it('takes the first matching workload in configured order', () => {
    expect(name({ 'x-workload': 'chat' }, '/v1/chat/completions', 'coder-7b')).toBe('chat');
    expect(name({ 'x-workload': 'rag', 'x-tenant': 'acme' }, '/v1/chat/completions', 'coder-7b')).toBe('chat-path');
  });

  it('matches a workload with a list of alternatives when any one holds', () => {
    const either = matcherFor('workloads:\n  - name: chat\n    match:\n      - header: { x-workload: chat }\n      - path: /v1/chat/completions\n  - name: other\n');
    expect(either.match({ 'x-workload': 'chat' }, '/v1/completions', undefined).name).toBe('chat');
    expect(either.match({}, '/v1/chat/completions', undefined).name).toBe('chat');
    expect(either.match({ 'x-workload': 'rag' }, '/v1/completions', undefined).name).toBe('other');
  });

  it('puts a request that matches nothing in the last workload, even when the last has match rules', () => {
    const strict = matcherFor('workloads:\n  - name: a\n    match: { path: /a }\n  - name: b\n    match: { path: /b }\n');
    expect(strict.match({}, '/a', undefined).name).toBe('a');
    expect(strict.match({}, '/c', undefined).name).toBe('b');
  });

  it('puts every request in "default" when no workloads are configured', () => {
    const plain = new WorkloadMatcher(loadSettings({ flags: {}, env: {} }).workloads);
    expect(plain.match({ 'x-workload': 'chat' }, '/v1/chat/completions', 'm').name).toBe('default');
  });
});
