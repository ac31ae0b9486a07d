/**
 * The fast path of a revocation between regions. Kafka carries every revocation durably, but at
 * 80 ms between regions its path (the audit transaction, an acks=all write, the follower's high
 * watermark) takes 0.5-1 s; the promise is 250 ms. So the node that takes `POST /v1/auth/revocations`
 * also sends the revocation straight to its peers (`SLUICE_PEERS`: the peer ports of the ingress
 * nodes in other regions), before its audit append. A peer holds it as provisional: it refuses the
 * client's tokens issued before `revoked_at` at once, until the Kafka record arrives (which replaces
 * it) or PROVISIONAL_TTL_MS passed (a POST that failed after the push: fail-safe, never fail-open).
 *
 * Pushes are signed with an HMAC keyed from SLUICE_MASTER_KEY (every node of a cluster shares it;
 * with the public development key no peer port opens: core/config/tokens.ts); the peer port
 * (`SLUICE_PEER_PORT` on `SLUICE_PEER_HOST`) serves only `POST /revocations`. A push counts once
 * (a replay within its window is refused), revokes nothing issued after it was sent (`revoked_at`
 * is capped at `sent_at`), and is logged with the node that sent it.
 *
 *   const peers = await startPeerServer(ctx, host, port);   // on an ingress node
 *   void pushRevocation(ctx, { client_id, revoked_at });    // best effort; Kafka stays the record
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import type { Context } from '../context.ts';
import { LruMap } from '../lru.ts';

/** How long a pushed revocation holds without its Kafka record. */
export const PROVISIONAL_TTL_MS = 5 * 60_000;
/** A push older than this (by its sender's clock) is refused: replays need not be honoured. */
const MAX_AGE_MS = 60_000;
const PUSH_TIMEOUT_MS = 2000;
const MAX_BODY = 4096;

export interface PushedRevocation {
  client_id: string;
  revoked_at: number;
}

/** The push-signing key of each master key, derived once. */
const pushKeys = new WeakMap<Buffer, Buffer>();
function pushKey(masterKey: Buffer): Buffer {
  let key = pushKeys.get(masterKey);
  if (!key) {
    key = createHmac('sha256', masterKey).update('sluice revocation push v1').digest();
    pushKeys.set(masterKey, key);
  }
  return key;
}

function sign(masterKey: Buffer, body: string): string {
  return createHmac('sha256', pushKey(masterKey)).update(body).digest('hex');
}

/** Pushes remembered to refuse a replay: more than a window's worth of revocations at any real rate. */
const SEEN_PUSHES = 100_000;

type Push = PushedRevocation & { sent_at: number; from: string };

/** A push's body, or null when it is not one. */
function parsePush(body: string): Push | null {
  let push: unknown;
  try {
    push = JSON.parse(body);
  } catch {
    return null;
  }
  const p = push as Partial<Push> | null;
  if (typeof p?.client_id !== 'string' || p.client_id === '') return null;
  if (!Number.isFinite(p.revoked_at) || !Number.isFinite(p.sent_at)) return null;
  const from = typeof p.from === 'string' ? p.from.slice(0, 200) : 'unnamed';
  return { client_id: p.client_id, revoked_at: p.revoked_at!, sent_at: p.sent_at!, from };
}

/** What a push reads of the process's context. */
export type PushDeps = Pick<Context, 'clock' | 'config' | 'log'>;

/** Sends the revocation to every peer at once; resolves when all answered or timed out (never throws). */
export async function pushRevocation(ctx: PushDeps, r: PushedRevocation): Promise<void> {
  const peers = ctx.config.peers;
  if (peers.length === 0) return;
  const from = `${ctx.config.region}/${hostname()}/${process.pid}`;
  const body = JSON.stringify({ ...r, sent_at: ctx.clock.now(), from });
  const signature = sign(ctx.config.masterKey, body);
  await Promise.all(
    peers.map((peer) =>
      fetch(`${peer}/revocations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-sluice-signature': signature },
        body,
        signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
      }).then(
        async (res) => {
          await res.arrayBuffer();
          if (res.status !== 204) ctx.log.warn('revocation push refused', { peer, status: res.status });
        },
        (err: Error) => ctx.log.warn('revocation push failed', { peer, error: err.message }),
      ),
    ),
  );
}

/** What the peer port reads of the process's context. */
export type PeerServerDeps = Pick<Context, 'clock' | 'config' | 'log' | 'revocations'>;

/** The peer port: applies signed pushes to this node's revocation list as provisional entries. */
export async function startPeerServer(
  ctx: PeerServerDeps,
  host: string,
  port: number,
  /** Told of every push applied here (a worker passes it to its siblings: cli/workers.ts). */
  onApplied?: (r: PushedRevocation & { until: number }) => void,
): Promise<{ port: number; close(): Promise<void> }> {
  // Signatures of the pushes applied, until they are too old to be accepted anyway.
  const seen = new LruMap<string, number>(SEEN_PUSHES);
  const server: Server = createServer((req, res) => {
    const refuse = (status: number, title: string, detail: string) =>
      res
        .writeHead(status, { 'content-type': 'application/problem+json' })
        .end(JSON.stringify({ type: 'about:blank', title, status, detail }));
    if (req.method !== 'POST' || req.url !== '/revocations') {
      refuse(404, 'Not Found', 'the peer port serves POST /revocations only');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const want = Buffer.from(sign(ctx.config.masterKey, body));
      const got = Buffer.from(String(req.headers['x-sluice-signature'] ?? ''));
      if (got.length !== want.length || !timingSafeEqual(got, want)) {
        refuse(401, 'Unauthorized', "X-Sluice-Signature is missing or not made with this cluster's key");
        return;
      }
      const push = parsePush(body);
      const now = ctx.clock.now();
      if (push === null) {
        refuse(400, 'Bad Request', 'a push is {"client_id": string, "revoked_at": ms, "sent_at": ms}');
        return;
      }
      if (Math.abs(now - push.sent_at) > MAX_AGE_MS) {
        refuse(400, 'Bad Request', `sent_at is more than ${MAX_AGE_MS / 1000} s from this node's clock`);
        return;
      }
      const signature = got.toString();
      const seenAt = seen.get(signature);
      if (seenAt !== undefined && now - seenAt <= 2 * MAX_AGE_MS) {
        refuse(409, 'Conflict', 'this push was applied before; a push counts once');
        return;
      }
      seen.set(signature, now);
      // A push speaks for what was issued before it was sent, never for tokens still to come.
      const revokedAt = Math.min(push.revoked_at, push.sent_at);
      const until = now + PROVISIONAL_TTL_MS;
      ctx.revocations.provisional(push.client_id, revokedAt, until);
      ctx.log.info('revocation push applied', {
        client_id: push.client_id,
        revoked_at: revokedAt,
        from: push.from,
        peer_address: req.socket.remoteAddress,
      });
      onApplied?.({ client_id: push.client_id, revoked_at: revokedAt, until });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
