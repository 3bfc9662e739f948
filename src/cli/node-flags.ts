/**
 * V8 flags `tokentap serve` is meant to run with: the container image's ENTRYPOINT passes them
 * (`node --max-semi-space-size=2 bin/tokentap.js`), the benchmark starts its sidecars with them,
 * and a test keeps the two equal. They must be on node's command line (or NODE_OPTIONS): V8 sizes
 * its heap when the process starts, before any of tokentap's code runs.
 *
 * `--max-semi-space-size=2` (MiB; Node 20's default lets each of the young generation's two
 * semi-spaces grow to 16): under streaming load V8 grows the young generation with the allocation
 * rate, and the process's memory with it, though nothing more is kept alive. Measured the way the
 * benchmark's paired cell measures (processes side by side on one core, 64 streams of 64 tokens,
 * 3 rounds): resident memory per open stream 118-126 KiB with the default against 28-31 KiB with
 * the cap, for 1-2 % more CPU per token in fresh processes and 2-4 % in processes after 20 s of
 * load (more, smaller young-generation collections: GC went from 2 % to 9 % of the profile).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];
