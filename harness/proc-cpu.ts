/**
 * Per-process CPU and memory for the dispatch bench, from /proc (Linux): utime+stime of
 * /proc/<pid>/stat in clock ticks and VmRSS of /proc/<pid>/status, sampled every 500 ms. A window
 * spans one scenario run: CPU seconds used in it and the peak RSS seen.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** The fields after "(comm)": index 0 is field 3 (state) of proc(5). */
function statFields(pid: number): string[] | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) the processes `pids` have used so far. */
export const cpuSec = (pids: number[]): number => pids.reduce((n, pid) => n + (cpuTicks(pid) ?? 0), 0) / CLK_TCK;

/** CPU seconds (user + system) a process and its children of `comm` have used so far. */
export const treeCpuSec = (root: number, comm = 'node'): number => cpuSec(processTree(root, comm));

/**
 * A process's own CPU seconds and those of its children it has reaped (cutime, cstime: the
 * processes it started and saw exit), or null when /proc does not have it.
 */
export function ownAndReapedCpuSec(pid: number): { own: number; reaped: number } | null {
  const f = statFields(pid);
  if (!f) return null;
  const [utime, stime, cutime, cstime] = f.slice(11, 15).map(Number);
  return { own: (utime + stime) / CLK_TCK, reaped: (cutime + cstime) / CLK_TCK };
}

function cpuTicks(pid: number): number | null {
  const f = statFields(pid);
  return f ? Number(f[11]) + Number(f[12]) : null; // utime, stime
}

/** A number field of /proc/<pid>/status (`VmRSS` in kB, …); null when the process or field is gone. */
function statusNumber(pid: number, field: string): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

const rssKb = (pid: number) => statusNumber(pid, 'VmRSS');
/**
 * How often the process's main thread (the thread group leader) has given up the CPU to wait:
 * each is a wake-up of its event loop.
 */
const mainThreadWaits = (pid: number) => statusNumber(pid, 'voluntary_ctxt_switches');

const pids = () =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);

/** A child of `parent` whose command name is `comm` (e.g. the java under `sluice kafka`). */
export function childPid(parent: number, comm: string): number | null {
  for (const pid of pids()) {
    const f = statFields(pid);
    if (f && Number(f[1]) === parent) {
      try {
        if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm) return pid;
      } catch {
        /* gone */
      }
    }
  }
  return null;
}

/** The process listening on 127.0.0.1/0.0.0.0:`port` (an already running broker), if visible. */
export function listenerPid(port: number): number | null {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const c = line.trim().split(/\s+/);
      if (c.length > 9 && c[1].endsWith(`:${hex}`) && c[3] === '0A') inodes.add(c[9]);
    }
  }
  if (inodes.size === 0) return null;
  for (const pid of pids()) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1])) return pid;
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return null;
}

/** `root` and its descendants named `comm` (e.g. the cluster workers of `sluice start`, not tsx's esbuild). */
export function processTree(root: number, comm = 'node'): number[] {
  const children = new Map<number, number[]>();
  for (const pid of pids()) {
    const f = statFields(pid);
    if (!f) continue;
    const ppid = Number(f[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) {
    for (const c of children.get(out[i]) ?? []) {
      try {
        if (readFileSync(`/proc/${c}/comm`, 'utf8').trim() === comm) out.push(c);
      } catch {
        /* gone */
      }
    }
  }
  return out;
}

export interface Usage {
  cpuSec: number;
  peakRssMb: number;
  /** The main threads' wake-ups in the window (processes alive at both ends; see mainThreadWaits). */
  wakeups: number;
}

interface Window {
  startTicks: Map<number, number>;
  startWaits: Map<number, number>;
  /** Each pid's CPU ticks at its latest sample: what a process that exits before the end used. */
  lastTicks: Map<number, { group: string; ticks: number }>;
  peakKb: Map<string, number>;
}

/**
 * Samples named groups of pids (a group's CPU and RSS are the sums over its pids). A window counts
 * each process's CPU from the window's start, or from its birth when it was born inside the window;
 * one that exits inside the window counts up to its last sample (every 500 ms).
 */
export class ProcSampler {
  private readonly windows = new Set<Window>();
  private readonly timer: NodeJS.Timeout;
  /** `groups()` is read at every sample, so processes can come and go. */
  constructor(private readonly groups: () => Map<string, number[]>) {
    this.timer = setInterval(() => this.sample(), 500);
    this.timer.unref();
  }
  private sample(): void {
    for (const [name, list] of this.groups()) {
      const kb = list.reduce((n, pid) => n + (rssKb(pid) ?? 0), 0);
      for (const w of this.windows) w.peakKb.set(name, Math.max(w.peakKb.get(name) ?? 0, kb));
      if (this.windows.size === 0) continue;
      for (const pid of list) {
        const ticks = cpuTicks(pid);
        if (ticks !== null) for (const w of this.windows) w.lastTicks.set(pid, { group: name, ticks });
      }
    }
  }
  begin(): Window {
    const w: Window = { startTicks: new Map(), startWaits: new Map(), lastTicks: new Map(), peakKb: new Map() };
    for (const list of this.groups().values()) {
      for (const pid of list) {
        const t = cpuTicks(pid);
        if (t !== null) w.startTicks.set(pid, t);
        const waits = mainThreadWaits(pid);
        if (waits !== null) w.startWaits.set(pid, waits);
      }
    }
    this.windows.add(w);
    this.sample();
    return w;
  }
  end(w: Window): Map<string, Usage> {
    this.sample();
    this.windows.delete(w);
    const ticksOf = new Map<string, number>();
    const wakeupsOf = new Map<string, number>();
    const counted = new Set<number>();
    for (const [name, list] of this.groups()) {
      let ticks = 0;
      let wakeups = 0;
      for (const pid of list) {
        const t = cpuTicks(pid);
        if (t === null) continue;
        ticks += t - (w.startTicks.get(pid) ?? 0);
        counted.add(pid);
        const [from, to] = [w.startWaits.get(pid), mainThreadWaits(pid)];
        if (from !== undefined && to !== null) wakeups += to - from;
      }
      ticksOf.set(name, ticks);
      wakeupsOf.set(name, wakeups);
    }
    // Processes of the window gone by its end (a worker that exited): up to their last sample.
    for (const [pid, last] of w.lastTicks) {
      if (counted.has(pid)) continue;
      ticksOf.set(last.group, (ticksOf.get(last.group) ?? 0) + last.ticks - (w.startTicks.get(pid) ?? 0));
    }
    const out = new Map<string, Usage>();
    for (const [name, ticks] of ticksOf)
      out.set(name, {
        cpuSec: ticks / CLK_TCK,
        peakRssMb: (w.peakKb.get(name) ?? 0) / 1024,
        wakeups: wakeupsOf.get(name) ?? 0,
      });
    return out;
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

/** The machine's CPU counters (/proc/stat): busy and total, in ticks over all cores. */
export function machineCpu(): { busy: number; total: number } {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = (f[3] ?? 0) + (f[4] ?? 0); // idle + iowait
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // without guest time, counted in user already
    return { busy: total - idle, total };
  } catch {
    return { busy: 0, total: 0 };
  }
}
