/**
 * Fetches hand the runner only partitions that brought records, for kafkajs 2.2.4, applied once
 * when core/kafka/client.ts loads.
 *
 * A kafkajs fetch answers with every assigned partition, and its runner takes each through its
 * worker queue as a batch of its own: an idle dispatcher's rung group (13 topics × 6 partitions)
 * made 78 batch objects, promises and queue turns every fetch only to find each empty, most of an
 * idle worker's allocations and so of its young collections, which wake all of V8's GC threads
 * (issue 33). A batch with no record at all is dropped here, before the runner's queue; what the
 * runner did with it was a heartbeat, which is sent as for a fetch that returned nothing. A batch
 * whose records were all filtered (transaction markers, aborted or compacted records) still goes
 * through, since the runner moves the partition's offset past them.
 */
import { kafkajsClass } from './kafkajs-internals.ts';

interface FetchedBatch {
  isEmpty(): boolean;
  isEmptyDueToFiltering(): boolean;
}

/** What the runner must see of a fetch: every batch that has records, or had and filtered them. */
export function withRecords<B extends FetchedBatch>(batches: B[]): B[] {
  const kept = batches.filter((b) => !b.isEmpty() || b.isEmptyDueToFiltering());
  return kept.length === batches.length ? batches : kept;
}

interface Runner {
  fetch(nodeId: number): Promise<FetchedBatch[]>;
  heartbeat(): Promise<void>;
}
// handleBatch: what the runner did with a batch without records was a heartbeat, and nothing else.
const Runner = kafkajsClass<Runner>('consumer/runner.js', ['fetch', 'heartbeat', 'handleBatch'], {
  fetch: 'if (batches.length === 0) {',
  handleBatch: 'if (batch.isEmpty()) {',
});
const fetch = Runner.prototype.fetch;
Runner.prototype.fetch = async function (this: Runner, nodeId: number) {
  const batches = await fetch.call(this, nodeId);
  const kept = withRecords(batches);
  // The runner heartbeats after a fetch that returned no batch; one whose batches were all empty is that too.
  if (kept.length === 0 && batches.length > 0) await this.heartbeat();
  return kept;
};
