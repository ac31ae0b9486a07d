/**
 * `work`'s value, or null once `ms` have passed. The timer is cleared either way, so a guard never
 * keeps the process alive after the work is done (a guard left running kept test files' processes
 * alive up to 58 s after their last test).
 */
export async function orNullAfter<T>(work: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `work`, or the error `late()` builds once `ms` have passed: the caller is answered in time, and
 * the work goes on (its later outcome is the caller's to handle, or to let go).
 *
 *   const offsets = await withDeadline(admin.fetchTopicOffsets(topic), 10_000, () => unavailable('...'));
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  const answered = await orNullAfter(
    work.then((value) => ({ value })),
    ms,
  );
  if (answered === null) throw late();
  return answered.value;
}
