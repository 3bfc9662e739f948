/**
 * .dockerignore matching as Docker's builder does it (moby/patternmatcher): patterns are relative
 * to the context root, `*` and `?` stay within one path segment, `**` spans segments, a leading `!`
 * re-includes, the last matching pattern wins, and a pattern that matches a directory matches
 * everything under it. Hand-written because no maintained package in the dependency tree
 * implements Docker's rules (gitignore matchers differ: they also match patterns at any depth).
 */

interface Rule {
  readonly regex: RegExp;
  readonly include: boolean;
}

export class DockerIgnore {
  private readonly rules: readonly Rule[];

  constructor(text: string) {
    this.rules = text
      .split(/\r?\n/)
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => {
        const include = line.startsWith('!');
        const pattern = (include ? line.slice(1) : line).trim().replace(/^\/+/, '').replace(/\/+$/, '');
        return { regex: patternRegex(pattern), include };
      });
  }

  /** True when the file at this context-relative path (forward slashes) is left out of the build context. */
  excludes(file: string): boolean {
    const segments = file.split('/');
    const candidates = segments.map((_, i) => segments.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const rule of this.rules) {
      if (candidates.some((candidate) => rule.regex.test(candidate))) excluded = !rule.include;
    }
    return excluded;
  }
}

function patternRegex(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i] as string;
    if (char === '*' && pattern[i + 1] === '*') {
      // `**/` matches zero or more directories; a trailing `**` matches anything.
      if (pattern[i + 2] === '/') {
        source += '(?:.*/)?';
        i += 2;
      } else {
        source += '.*';
        i += 1;
      }
    } else if (char === '*') {
      source += '[^/]*';
    } else if (char === '?') {
      source += '[^/]';
    } else {
      source += char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}
