/**
 * When `--workers auto` adds a worker and when it retires one. Every worker of a node applies every
 * view and the whole attempt history, whatever its share of the deliveries, and each event crosses
 * between them: a second worker pays for itself only once one is busy (docs/decisions.md, "One
 * worker while one suffices"). So a node starts with `min` workers and each reports its event
 * loop's utilisation every second (the share of time it was not waiting in epoll):
 * - grow: the workers' mean over the last `growAfterMs` is above `growBusy`;
 * - shrink: one fewer worker would each have carried less than `shrinkBusy` of their sum over the
 *   last `shrinkAfterMs`.
 * No change comes sooner than its window after the last (a new worker's start and the rebalance
 * each change brings are not load), and none while a worker is still starting or retiring (the
 * primary asks only then). A worker that sent nothing over the grow window counts as busy (its loop
 * is blocked); one fewer is judged only on workers that all reported.
 */
export interface ScalingRule {
  min: number;
  max: number;
  growBusy: number;
  shrinkBusy: number;
  growAfterMs: number;
  shrinkAfterMs: number;
}

/** A change, with the share it was judged on: the workers' mean (grow), or each of one fewer's (shrink). */
export type ScalingStep = { step: 'grow' | 'shrink'; busy: number } | null;

interface Sample {
  at: number;
  busy: number;
}

export class WorkerScaling {
  /** Each live worker's reports over the longer window, oldest first. */
  private readonly samples = new Map<number, Sample[]>();
  private changedAt: number;

  constructor(
    readonly rule: ScalingRule,
    now: number,
  ) {
    this.changedAt = now;
  }

  /** Worker `index` was busy `busy` (0-1) of the second before `now`. */
  report(index: number, busy: number, now: number): void {
    const list = this.samples.get(index) ?? [];
    list.push({ at: now, busy });
    const keep = now - Math.max(this.rule.growAfterMs, this.rule.shrinkAfterMs);
    while (list.length > 0 && list[0].at <= keep) list.shift();
    this.samples.set(index, list);
  }

  /** A worker was added or removed at `now`: the windows start again. */
  changed(now: number, gone?: number): void {
    this.changedAt = now;
    if (gone !== undefined) this.samples.delete(gone);
  }

  /** What to do now with `live`, the indexes of the workers that are up and not retiring. */
  decide(live: readonly number[], now: number): ScalingStep {
    const { min, max, growBusy, shrinkBusy, growAfterMs, shrinkAfterMs } = this.rule;
    if (live.length < max && now - this.changedAt >= growAfterMs) {
      // A worker silent for the whole window has its loop blocked: busy.
      const busy = sum(live.map((i) => this.mean(i, now - growAfterMs) ?? 1)) / live.length;
      if (busy > growBusy) return { step: 'grow', busy };
    }
    if (live.length > min && now - this.changedAt >= shrinkAfterMs) {
      const means = live.map((i) => this.mean(i, now - shrinkAfterMs));
      const busy = means.every((m) => m !== null) ? sum(means as number[]) / (live.length - 1) : 1;
      if (busy < shrinkBusy) return { step: 'shrink', busy };
    }
    return null;
  }

  /** The mean of worker `index`'s reports after `since`; null when it sent none. */
  private mean(index: number, since: number): number | null {
    const inWindow = (this.samples.get(index) ?? []).filter((s) => s.at > since);
    return inWindow.length === 0 ? null : sum(inWindow.map((s) => s.busy)) / inWindow.length;
  }
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
