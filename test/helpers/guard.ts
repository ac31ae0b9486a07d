/**
 * `work`'s value, or null once `ms` have passed. The timer is cleared either way: a guard left
 * running kept a test file's process alive after its last test (sigterm.test.ts 58 s, revocation
 * 16 s in one full run), each second of it a slot of the run's lanes doing nothing.
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
