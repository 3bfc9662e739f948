/**
 * The error catalogue (STYLE.md habit 3): every error tokentap reports to an operator has a stable
 * code and a message that says what to do next. Nothing here ever reaches a proxied client; the only
 * body the proxy itself writes is the upstream-error JSON in proxy/upstream-error.ts.
 */
export const ERROR_CODES = {
  TOKENTAP_ERR_CONFIG_INVALID: 'configuration is invalid',
  TOKENTAP_ERR_CONFIG_UNREADABLE: 'configuration file cannot be read',
  TOKENTAP_ERR_USAGE: 'command line is invalid',
  TOKENTAP_ERR_LISTEN: 'cannot listen on the configured address',
  TOKENTAP_ERR_WRITE: 'cannot write the rendered files',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class TokentapError extends Error {
  readonly code: ErrorCode;
  /** Each problem on its own line, already prefixed with where it is (file, path, flag or variable). */
  readonly problems: readonly string[];

  constructor(code: ErrorCode, problems: readonly string[]) {
    super(`${code}: ${ERROR_CODES[code]}\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'TokentapError';
    this.code = code;
    this.problems = problems;
  }
}
