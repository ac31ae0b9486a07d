import { start } from './start.ts';
import { ingress } from './ingress.ts';
import { dispatcher } from './dispatcher.ts';
import { kafka } from './kafka.ts';
import { admin } from './admin.ts';
import { dlq } from './dlq.ts';
import { audit } from './audit.ts';
import { contract } from './contract.ts';

export interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const COMMANDS: Record<string, Command> = { start, ingress, dispatcher, kafka, admin, audit, contract, dlq };
