import { start } from './start.ts';
import { ingress } from './ingress.ts';
import { dispatcher } from './dispatcher.ts';
import { kafka } from './kafka.ts';
import { admin } from './admin.ts';
import { dlq } from './dlq.ts';
import { audit } from './audit.ts';
import { contract } from './contract.ts';
import { frontDoor } from './front-door.ts';

export type { Command } from '../command.ts';
import type { Command } from '../command.ts';

export const COMMANDS: Record<string, Command> = {
  start,
  ingress,
  dispatcher,
  kafka,
  admin,
  audit,
  contract,
  dlq,
  'front-door': frontDoor,
};
