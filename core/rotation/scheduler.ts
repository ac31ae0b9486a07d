/**
 * The rotation scheduler: every node that serves runs one, only the lease holder acts. Each check
 * reads the injectable clock, so a test moves time and calls `check()` to run 30 days in a second.
 */
import type { Context } from '../context.ts';
import { LeaderLease } from './leader-lease.ts';
import { rotateKeys, type KeyRotationDeps } from './key-rotation.ts';
import { rotateSecrets, type SecretRotationDeps } from './secret-rotation.ts';

/** What the rotation scheduler reads of the process's context: its lease's, and the rotations'. */
export type RotationDeps = Pick<Context, 'config' | 'kafka' | 'log' | 'topics'> & KeyRotationDeps & SecretRotationDeps;

export class RotationScheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  private constructor(
    private readonly ctx: RotationDeps,
    readonly lease: LeaderLease,
  ) {}

  static async start(ctx: RotationDeps): Promise<RotationScheduler> {
    const lease = new LeaderLease(
      ctx.kafka,
      ctx.topics.control,
      `${ctx.config.topicPrefix}.rotation-leader`,
      ctx.config.idleFetchWaitMs,
      // A tombstone of a key no view reads (the event-id view reads `evt:` keys only).
      () =>
        ctx.producer.send(ctx.topics.control, [{ key: 'rotation-leader:stopping', value: null }], { timeoutMs: 2000 }),
    );
    await lease.start();
    const s = new RotationScheduler(ctx, lease);
    s.schedule();
    return s;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.check()
        .catch((err) => this.ctx.log.error('rotation check failed', { error: (err as Error).message }))
        .finally(() => this.schedule());
    }, this.ctx.config.rotationCheckMs);
    this.timer.unref();
  }

  /** One check when this node leads; concurrent calls share the running one. Returns whether it led. */
  async check(): Promise<boolean> {
    if (!this.lease.isLeader || this.stopped) return false;
    if (!this.running) {
      this.running = (async () => {
        await rotateKeys(this.ctx);
        await rotateSecrets(this.ctx);
      })().finally(() => {
        this.running = null;
      });
    }
    await this.running;
    return true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => {});
    await this.lease.stop();
  }
}
