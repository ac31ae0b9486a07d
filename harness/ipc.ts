/**
 * A tiny request/reply layer over Node's IPC channel between a bench and its helper processes: each
 * request carries an id; the child answers with the same id, or with `error`. The messages of the
 * shared helpers are declared beside them (receiver.ts, load.ts).
 */
import type { ChildProcess } from 'node:child_process';
type Reply = { id: number; error?: string; [k: string]: unknown };

/** Parent side: `call(msg)` resolves with the child's reply to that message. */
export function rpc<Req extends object, Rep>(child: ChildProcess): (msg: Req) => Promise<Rep> {
  let next = 0;
  const pending = new Map<number, { resolve: (r: Rep) => void; reject: (e: Error) => void }>();
  child.on('message', (m: Reply) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error));
    else p.resolve(m as unknown as Rep);
  });
  child.once('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`child exited (${signal ?? code}) before answering`));
    pending.clear();
  });
  return (msg) =>
    new Promise<Rep>((resolve, reject) => {
      const id = ++next;
      if (!child.connected) return reject(new Error('child process is gone'));
      pending.set(id, { resolve, reject });
      child.send({ ...msg, id }, (err) => {
        if (err && pending.delete(id)) reject(err);
      });
    });
}

/** Child side: answers every request with `handle`'s result; exits when the parent goes away. */
export function serve<Req>(handle: (msg: Req) => Promise<object>): void {
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: Req & { id: number }) => {
    handle(m).then(
      (out) => process.send!({ ...out, id: m.id }),
      (err: Error) => process.send!({ id: m.id, error: err.stack ?? String(err) }),
    );
  });
}
