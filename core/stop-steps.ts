/**
 * The steps a stopping process is in. A stop cut short by its grace (cli/runtime.ts) names them,
 * so a shutdown that hangs says what it waited for instead of only that it did.
 *
 *   await stopStep('dispatcher: attempts in flight', () => settled());
 */
const underWay = new Map<string, number>();

export async function stopStep<T>(name: string, step: () => Promise<T>): Promise<T> {
  const key = underWay.has(name) ? `${name} #${underWay.size}` : name;
  underWay.set(key, Date.now());
  try {
    return await step();
  } finally {
    underWay.delete(key);
  }
}

/** "fan-out: batches under way (12034 ms), context: state views (800 ms)", or "none". */
export function stopStepsUnderWay(now = Date.now()): string {
  return [...underWay].map(([name, since]) => `${name} (${now - since} ms)`).join(', ') || 'none';
}
