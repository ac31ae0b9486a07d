/**
 * A node whose spans are kept in memory: tracing started first (every trace sampled, nothing
 * exported), then the node with its dispatcher and one receiver that answers `answer`.
 */
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { startTracing } from '../../core/tracing.ts';
import { receiver, type Answer, type TestReceiver } from '../dispatcher/receiver.ts';
import { startTestNode, type TestNode } from './sluice.ts';

export interface TracedNode {
  exporter: InMemorySpanExporter;
  node: TestNode;
  r: TestReceiver;
  /** Closes the receiver and the node, then stops tracing. */
  close(): Promise<void>;
}

export async function startTracedNode(env: Record<string, string>, answer: Answer): Promise<TracedNode> {
  const exporter = new InMemorySpanExporter();
  const tracing = await startTracing({
    serviceName: 'sluice-test',
    exporter: 'none',
    sampleRatio: 1,
    otlpEndpoint: 'http://127.0.0.1:1/v1/traces',
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', ...env }, { dispatcher: true });
  const r = await receiver(answer);
  return {
    exporter,
    node,
    r,
    async close() {
      await r.close();
      await node.close();
      await tracing.stop();
    },
  };
}
