/** Types for node-version-check.js (plain JavaScript: the launcher runs it before dist/ is loaded). */
export declare function nodeVersionProblem(root: string, version: string): string | undefined;
