/**
 * Toxiproxy for the regions lab: the server built by scripts/install-toxiproxy.sh, one per region
 * (run inside the region's namespace), and a small client of its HTTP API. A proxy in region r
 * named `<what>-<remote>` forwards r's traffic to the remote region; a latency toxic on each
 * direction gives the one-way delay.
 *
 *   const api = toxiproxyApi('10.231.5.11', 8474);
 *   await api.create({ name: 'k-b', listen: '10.231.5.11:19101', upstream: '10.231.5.12:9091' });
 *   await api.latency('k-b', 40);   // 40 ms each way: 80 ms RTT
 *   await api.enable('k-b', false); // cut: drops the proxy's connections and refuses new ones
 */
import { spawnSync } from 'node:child_process';
import { PROJECT_ROOT } from '../../core/paths.ts';

const ROOT = PROJECT_ROOT;

/** The server's path, building it through scripts/install-toxiproxy.sh when missing. */
export function toxiproxyServer(log: (line: string) => void = () => {}): string {
  log('finding toxiproxy-server (scripts/install-toxiproxy.sh builds it once)');
  const r = spawnSync('bash', [`${ROOT}/scripts/install-toxiproxy.sh`], { encoding: 'utf8', cwd: ROOT });
  if (r.status !== 0) throw new Error(`scripts/install-toxiproxy.sh failed:\n${r.stderr}`);
  return r.stdout.trim().split('\n').pop()!;
}

export interface ProxySpec {
  name: string;
  listen: string;
  upstream: string;
}

export interface ToxiproxyApi {
  create(p: ProxySpec): Promise<void>;
  /** Sets the latency toxic on both directions to `oneWayMs` (0 removes it). */
  latency(name: string, oneWayMs: number): Promise<void>;
  enable(name: string, enabled: boolean): Promise<void>;
  names(): string[];
}

export function toxiproxyApi(host: string, port: number): ToxiproxyApi {
  const base = `http://${host}:${port}`;
  const names: string[] = [];
  const toxics = new Set<string>();
  async function req(method: string, path: string, body?: unknown, ok: number[] = [200, 201, 204]) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: body ? { 'content-type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (!ok.includes(res.status)) throw new Error(`toxiproxy ${method} ${path}: ${res.status} ${text}`);
    return text;
  }
  return {
    async create(p) {
      await req('POST', '/proxies', { ...p, enabled: true });
      names.push(p.name);
    },
    async latency(name, oneWayMs) {
      for (const stream of ['upstream', 'downstream']) {
        const toxic = `lat-${stream}`;
        const key = `${name}/${toxic}`;
        if (toxics.has(key)) {
          await req('DELETE', `/proxies/${name}/toxics/${toxic}`, undefined, [204, 404]);
          toxics.delete(key);
        }
        if (oneWayMs <= 0) continue;
        await req('POST', `/proxies/${name}/toxics`, {
          name: toxic,
          type: 'latency',
          stream,
          toxicity: 1,
          attributes: { latency: oneWayMs, jitter: 0 },
        });
        toxics.add(key);
      }
    },
    async enable(name, enabled) {
      await req('POST', `/proxies/${name}`, { enabled });
    },
    names: () => [...names],
  };
}
