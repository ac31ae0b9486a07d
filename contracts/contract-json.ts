/**
 * Run by `npm run build:server` after tsc: writes build/contracts/openapi.json, the contract's
 * parsed form that loadContract (contracts/contract.ts) reads while contracts/openapi.yaml is
 * unchanged.
 */
import { writeContractJson } from './contract.ts';

writeContractJson();
