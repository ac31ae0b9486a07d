/**
 * `work`, or the error `late()` builds once `ms` have passed: the caller is answered in time, and
 * the work goes on (its later outcome is the caller's to handle, or to let go). The timer is
 * cleared either way.
 *
 *   const offsets = await withDeadline(admin.fetchTopicOffsets(topic), 10_000, () => unavailable('...'));
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
