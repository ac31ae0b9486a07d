/**
 * The regions lab's network: one Linux network namespace per region, each joined by a veth pair to
 * a bridge in the root namespace (where the lab's own load generator and receivers live). Names
 * carry the lab process's pid, so a lab killed with SIGKILL is swept away by the next one
 * (sweepStaleLabs). Needs root (`ip netns`).
 *
 *   const net = createLabNet(['a', 'b', 'c']);   // net.ip('a') → 10.231.x.11, net.ns('a') → 'sl1234-a'
 *   net.destroy();                               // synchronous: safe in an 'exit' handler
 */
import { spawnSync } from 'node:child_process';

export class LabNetError extends Error {}

export function ip(args: string[], allowFail = false): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.error) throw new LabNetError(`ip ${args.join(' ')}: ${r.error.message} (is iproute2 installed?)`);
  if (r.status !== 0 && !allowFail) throw new LabNetError(`ip ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** Why this process cannot build namespaces (not root, no `ip`), or null when it can. */
export function whyNoNamespaces(): string | null {
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return 'the regions lab needs root: it creates network namespaces and veth pairs (run it as root, e.g. sudo)';
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  if (r.error || r.status !== 0)
    return `\`ip netns\` does not work here: ${(r.error?.message ?? r.stderr).trim()} (install iproute2)`;
  return null;
}

export interface LabNet {
  id: string;
  regions: readonly string[];
  /** The root namespace's address on the bridge (receivers and the load generator listen there). */
  hostIp: string;
  ip(region: string): string;
  ns(region: string): string;
  /** argv prefix that runs a command inside the region's namespace. */
  exec(region: string): string[];
  destroy(): void;
}

const PREFIX = 'sl';

/** Deletes namespaces and links left by labs whose process is gone (a SIGKILLed run). */
export function sweepStaleLabs(): void {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  for (const line of ip(['netns', 'list'], true).split('\n')) {
    const m = new RegExp(`^(${PREFIX}(\\d+)-[a-z0-9]+)\\b`).exec(line.trim());
    if (!m || alive(Number(m[2]))) continue;
    killNamespacePids(m[1]);
    ip(['netns', 'del', m[1]], true);
  }
  for (const line of ip(['-o', 'link', 'show'], true).split('\n')) {
    const m = new RegExp(`^\\d+: (${PREFIX}(\\d+)br)[:@]`).exec(line);
    if (m && !alive(Number(m[2]))) ip(['link', 'del', m[1]], true);
  }
}

function killNamespacePids(ns: string): void {
  for (const pid of ip(['netns', 'pids', ns], true).split('\n').map(Number).filter(Boolean)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

export function createLabNet(regions: readonly string[]): LabNet {
  const id = `${PREFIX}${process.pid}`;
  // A /24 of its own per lab (from the pid), so two labs on one host do not share addresses.
  const subnet = `10.231.${process.pid % 250}`;
  const bridge = `${id}br`;
  const ns = (r: string) => `${id}-${r}`;
  const addr = (r: string) => `${subnet}.${11 + regions.indexOf(r)}`;
  let destroyed = false;
  const net: LabNet = {
    id,
    regions,
    hostIp: `${subnet}.1`,
    ip: addr,
    ns,
    exec: (r) => ['ip', 'netns', 'exec', ns(r)],
    destroy() {
      if (destroyed) return;
      destroyed = true;
      for (const r of regions) {
        killNamespacePids(ns(r));
        ip(['netns', 'del', ns(r)], true);
      }
      ip(['link', 'del', bridge], true);
    },
  };
  try {
    ip(['link', 'add', bridge, 'type', 'bridge']);
    ip(['addr', 'add', `${subnet}.1/24`, 'dev', bridge]);
    ip(['link', 'set', bridge, 'up']);
    for (const r of regions) {
      const host = `${id}${r}h`;
      const inner = `${id}${r}n`;
      ip(['netns', 'add', ns(r)]);
      ip(['link', 'add', host, 'type', 'veth', 'peer', 'name', inner]);
      ip(['link', 'set', inner, 'netns', ns(r)]);
      ip(['link', 'set', host, 'master', bridge, 'up']);
      ip(['-n', ns(r), 'addr', 'add', `${addr(r)}/24`, 'dev', inner]);
      ip(['-n', ns(r), 'link', 'set', inner, 'up']);
      ip(['-n', ns(r), 'link', 'set', 'lo', 'up']);
    }
  } catch (err) {
    net.destroy();
    throw err;
  }
  return net;
}
