/**
 * Polls `done` every `everyMs` until it holds or `timeoutMs` passed; true when it held. For waits on
 * work that ends without an event to await (attempts in flight, batches under way, deliveries
 * arriving at a receiver).
 */
export async function waitUntil(done: () => boolean, timeoutMs: number, everyMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return true;
}
