import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // No user settings in the workers' environment; a private temp folder checked for leftovers.
    globalSetup: ['test/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests each use their own schema, so files can run side by side.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
