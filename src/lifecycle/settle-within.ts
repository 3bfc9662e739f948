/**
 * Waits for `work` at most `budgetMs`: 'done' when it resolved in time, the error when it failed,
 * 'timed out' otherwise (the work goes on unobserved). For the final OTLP export at shutdown: a
 * collector that is down or slow must neither fail nor hold up a clean stop.
 */
export async function settleWithin(work: Promise<unknown>, budgetMs: number): Promise<'done' | 'timed out' | Error> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed out'>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), budgetMs);
  });
  try {
    return await Promise.race([
      work.then(
        () => 'done' as const,
        (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
