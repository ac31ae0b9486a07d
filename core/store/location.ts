/**
 * Which directory a process keeps its view store in: `<SLUICE_DATA_DIR>/<topic prefix>/<name>`. The
 * name stays the same across restarts of one process role (`worker-<i>` under `sluice start
 * --workers`, else the component: `ingress`, `dispatcher`, `dlq`...), so a restart resumes from it.
 * Two live processes never share a directory: the holder writes its pid into `owner.pid`, and a
 * process that finds the directory held by a live process (or by another context of its own, as
 * tests start several nodes in one process) takes a fresh `<name>.<pid>.<random>` instead, removed
 * when it closes, or by a later start when its process died first.
 *
 *   const dir = claimStoreDir(config.dataDir, config.topicPrefix, storeName('ingress'));
 *   ... ViewStore.open(dir.path) ...; dir.release();
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export interface StoreDir {
  path: string;
  /** True for a fresh directory that is removed on release. */
  temporary: boolean;
  release(): void;
}

const OWNER = 'owner.pid';
const FRESH = /\.(\d+)\.[0-9a-f]{8}$/;
/** Directories held by contexts of this process. */
const held = new Set<string>();

/** This process's stable name: its worker index under `sluice start --workers`, else its component. */
export function storeName(component: string): string {
  const worker = process.env.SLUICE_WORKER_INDEX;
  return worker !== undefined && /^\d+$/.test(worker) ? `worker-${worker}` : component;
}

export function claimStoreDir(dataDir: string, topicPrefix: string, name: string): StoreDir {
  const parent = join(dataDir, topicPrefix);
  mkdirSync(parent, { recursive: true });
  removeAbandoned(parent);
  const stable = join(parent, name);
  if (hold(stable)) return { path: stable, temporary: false, release: () => release(stable, false) };
  const fresh = join(parent, `${name}.${process.pid}.${randomBytes(4).toString('hex')}`);
  if (!hold(fresh)) throw new Error(`cannot hold the fresh store directory ${fresh}`);
  return { path: fresh, temporary: true, release: () => release(fresh, true) };
}

function hold(dir: string): boolean {
  if (held.has(dir)) return false;
  mkdirSync(dir, { recursive: true });
  const file = join(dir, OWNER);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      held.add(dir);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (alive(ownerPid(file))) return false;
    rmSync(file, { force: true }); // left by a process that is gone
  }
  return false;
}

function release(dir: string, remove: boolean): void {
  if (!held.delete(dir)) return;
  rmSync(remove ? dir : join(dir, OWNER), { recursive: true, force: true });
}

function ownerPid(file: string): number {
  try {
    return Number(readFileSync(file, 'utf8').trim());
  } catch {
    return 0;
  }
}

/**
 * Whether another process with this pid runs. Our own pid counts as dead: `held` already answered
 * for this process's contexts, so the file is from an earlier process that had our pid (a container restart).
 */
function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Fresh directories whose process died before removing them. */
function removeAbandoned(parent: string): void {
  for (const name of readdirSync(parent)) {
    const pid = FRESH.exec(name)?.[1];
    const dir = join(parent, name);
    if (pid !== undefined && !held.has(dir) && !alive(Number(pid))) rmSync(dir, { recursive: true, force: true });
  }
}
