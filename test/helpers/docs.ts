import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A documentation page of the repository, as written. */
export function readDoc(path: string): string {
  return readFileSync(`${ROOT}${path}`, 'utf8');
}

/**
 * The fenced code blocks of `markdown` in `language` ('' for blocks with no language), in page
 * order: what a reader copies. Fences are paired in order, so the closing fence of one block is never
 * taken for the opening fence of a block without a language.
 */
export function fencedBlocks(markdown: string, language: string): string[] {
  const blocks: string[] = [];
  let open: { language: string; lines: string[] } | undefined;
  for (const line of markdown.split('\n')) {
    if (open === undefined) {
      const fence = /^```(.*)$/.exec(line);
      if (fence !== null) open = { language: (fence[1] as string).trim(), lines: [] };
    } else if (line === '```') {
      if (open.language === language) blocks.push(open.lines.map((body) => `${body}\n`).join(''));
      open = undefined;
    } else {
      open.lines.push(line);
    }
  }
  return blocks;
}

/**
 * The commands of a shell block as a reader copies them, one per entry: comment-only and blank
 * lines dropped, a line continued with a trailing backslash kept together with the next (bash
 * reads the backslash-newline as the user's terminal does).
 */
export function shellCommands(block: string): string[] {
  const commands: string[] = [];
  let pending = '';
  for (const line of block.split('\n')) {
    if (pending === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    pending += pending === '' ? line : `\n${line}`;
    if (!line.endsWith('\\')) {
      commands.push(pending);
      pending = '';
    }
  }
  if (pending !== '') commands.push(pending);
  return commands;
}
