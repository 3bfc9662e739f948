/** Types for module-tests.mjs (plain JavaScript, so that test/mutation/mutate.mjs runs on Node without a build). */
export declare const moduleTests: Record<string, string[]>;
