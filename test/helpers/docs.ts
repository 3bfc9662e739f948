import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A documentation page of the repository, as written. */
export function readDoc(path: string): string {
  return readFileSync(`${ROOT}${path}`, 'utf8');
}

/** The fenced code blocks of `markdown` in `language`, in page order: what a reader copies. */
export function fencedBlocks(markdown: string, language: string): string[] {
  const blocks: string[] = [];
  const fence = new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, 'gm');
  for (const match of markdown.matchAll(fence)) blocks.push(match[1] as string);
  return blocks;
}
