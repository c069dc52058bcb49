import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests each use their own schema, so files can run side by side.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
