import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Checks relative links in Markdown the way GitHub renders them: the target file (or directory) must
 * exist, and a `#anchor` into a Markdown file must name one of its headings (or an `<a id>`/`<a name>`).
 * Links inside fenced code, inline code and HTML comments are not links and are skipped.
 */

export interface LinkProblem {
  /** `file:line`, relative to the root the check was given. */
  where: string;
  target: string;
  problem: string;
}

/**
 * GitHub's heading anchor (github-slugger): the rendered text lower-cased, every character that is not
 * a letter, number, mark, space, `_` or `-` dropped, each space turned into `-` (runs are not merged).
 */
export function headingSlugBase(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link or image renders as its text
    .replace(/<[^>]+>/g, '') // inline HTML tags render as nothing visible
    .replace(/`/g, '')
    .replace(/\*/g, '');
  return rendered.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a Markdown file offers: heading slugs, repeats suffixed -1, -2 in order, and HTML ids. */
export function markdownAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const add = (base: string): void => {
    let slug = base;
    for (let n = 1; anchors.has(slug); n++) slug = `${base}-${n}`;
    anchors.add(slug);
  };
  const lines = proseLines(markdown, { keepInlineCode: true });
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line === undefined) continue;
    const atx = /^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (atx) {
      add(headingSlugBase(atx[1] ?? ''));
      continue;
    }
    const next = lines[i + 1];
    // A setext heading: a paragraph line underlined with === (h1) or --- (h2).
    if (next !== undefined && /^ {0,3}(=+|-+)[ \t]*$/.test(next) && isParagraphLine(line)) {
      add(headingSlugBase(line.trim()));
      i++;
      continue;
    }
    for (const m of line.matchAll(/<a\s[^>]*\b(?:id|name)\s*=\s*"([^"]+)"/gi)) anchors.add(m[1] ?? '');
  }
  return anchors;
}

function isParagraphLine(line: string): boolean {
  return line.trim() !== '' && !/^\s*([-*+>|#]|\d+[.)]\s)/.test(line);
}

/**
 * The file's lines with what is not prose blanked: fenced code blocks, HTML comments and (unless kept,
 * as headings need them for their anchors) inline code spans, whose characters become spaces so line
 * numbers and the text around them stay in place.
 */
function proseLines(markdown: string, { keepInlineCode = false } = {}): string[] {
  const withoutComments = markdown.replace(/<!--[\s\S]*?-->/g, (c) => c.replace(/[^\n]/g, ' '));
  const lines = withoutComments.split(/\r?\n/);
  let fence: string | undefined;
  return lines.map((line) => {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (opener && opener[1]?.[0] === fence[0] && (opener[1]?.length ?? 0) >= fence.length) fence = undefined;
      return '';
    }
    if (opener) {
      fence = opener[1];
      return '';
    }
    return keepInlineCode ? line : line.replace(/(`+)[^`]*?\1/g, (code) => ' '.repeat(code.length));
  });
}

/** The link targets of a Markdown file, with their 1-based line: inline links, images and reference definitions. */
export function markdownLinks(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  proseLines(markdown).forEach((line, index) => {
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) {
      links.push({ line: index + 1, target: m[1] ?? '' });
    }
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
    if (definition) links.push({ line: index + 1, target: definition[1] ?? '' });
  });
  return links;
}

/** Problems with every relative link and anchor in the given Markdown files (paths relative to root). */
export function checkMarkdownLinks(root: string, files: string[]): LinkProblem[] {
  const anchors = new AnchorCache();
  return files.flatMap((file) =>
    markdownLinks(readFileSync(resolve(root, file), 'utf8')).flatMap(({ line, target }) =>
      checkLink(root, file, target, `${file}:${line}`, anchors),
    ),
  );
}

/** Markdown files' anchors, each file read once per check. */
export class AnchorCache {
  private readonly byPath = new Map<string, Set<string>>();

  of(path: string): Set<string> {
    let anchors = this.byPath.get(path);
    if (!anchors) {
      anchors = markdownAnchors(readFileSync(path, 'utf8'));
      this.byPath.set(path, anchors);
    }
    return anchors;
  }
}

/** The problem (none, or one) with a link target written in `file` (relative to root). */
export function checkLink(
  root: string,
  file: string,
  target: string,
  where: string,
  anchors = new AnchorCache(),
): LinkProblem[] {
  if (target === '') return [{ where, target, problem: 'empty link target' }];
  // Absolute URLs (http:, https:, mailto:...) and protocol-relative ones are not this repository's.
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) return [];
  const hash = target.indexOf('#');
  const anchor = hash === -1 ? undefined : percentDecoded(target.slice(hash + 1));
  const path = percentDecoded(hash === -1 ? target : target.slice(0, hash));
  if (anchor === null || path === null) return [{ where, target, problem: 'malformed percent-encoding' }];
  const source = resolve(root, file);
  const linked = path === '' ? source : path.startsWith('/') ? join(root, path) : resolve(dirname(source), path);
  if (!existsSync(linked)) return [{ where, target, problem: `no such file: ${relative(root, linked)}` }];
  if (anchor === undefined || !linked.endsWith('.md') || statSync(linked).isDirectory()) return [];
  if (anchors.of(linked).has(anchor)) return [];
  return [{ where, target, problem: `no heading with anchor #${anchor} in ${relative(root, linked)}` }];
}

function percentDecoded(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** `README.md` and every `.md` under `docs/`, relative to root, sorted. */
export function documentationFiles(root: string): string[] {
  const files = existsSync(join(root, 'README.md')) ? ['README.md'] : [];
  const walk = (dir: string): void => {
    if (!existsSync(join(root, dir))) return;
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) files.push(path);
    }
  };
  walk('docs');
  return files.sort();
}
