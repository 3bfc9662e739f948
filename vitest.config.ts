import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Timing-based integration tests share a 2-core machine: keep files from starving each other.
    maxWorkers: 2,
  },
});
