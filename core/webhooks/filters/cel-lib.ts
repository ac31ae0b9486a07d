/**
 * @bufbuild/cel, loaded on first use. With @bufbuild/protobuf and @bufbuild/re2 it is about 130
 * modules (~0.15 CPU-s at every process start) that a process never needs until it compiles or
 * evaluates a filter. Every caller goes through `cel()`, so one copy of the library (its CommonJS
 * build) makes and reads every CEL value.
 */
import { createRequire } from 'node:module';
import type * as Cel from '@bufbuild/cel';

let lib: typeof Cel | undefined;

export function cel(): typeof Cel {
  lib ??= createRequire(import.meta.url)('@bufbuild/cel') as typeof Cel;
  return lib;
}
