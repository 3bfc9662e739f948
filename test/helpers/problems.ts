import { TokentapError } from '../../src/errors.js';

/**
 * The problems a TokentapError lists when `run` throws one. Fails the test when `run` succeeds, and
 * rethrows anything else, so a bug is never mistaken for a refused input.
 */
export function problemsOf(run: () => unknown): readonly string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof TokentapError) return error.problems;
    throw error;
  }
  throw new Error('expected a TokentapError listing problems');
}
