/**
 * Every process started as `sluice …` runs with the idle V8 flags: the `#!` line of bin/sluice.js
 * carries them, `sluice start` gives them to its workers, and harnesses that run `node <bin>` read
 * them from that line.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DISPATCHER_V8_FLAGS, IDLE_V8_FLAGS, shebangNodeFlags } from '../../cli/heap.ts';
import { SLUICE_BIN } from '../../harness/sluice-cli.ts';

t.test('the sluice executable and the workers of `sluice start` carry the idle flags', async (t) => {
  t.same(IDLE_V8_FLAGS, ['--no-memory-reducer']);
  for (const flag of IDLE_V8_FLAGS) {
    t.ok(shebangNodeFlags(SLUICE_BIN).includes(flag), `bin/sluice.js's #! line has ${flag}`);
    t.ok(DISPATCHER_V8_FLAGS.includes(flag), `the workers' flags have ${flag}`);
  }
});

t.test('the flags are read from a #! line of any form, and none from one without node', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-shebang-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cases: [string, string[]][] = [
    ['#!/usr/bin/env node', []],
    [
      '#!/usr/bin/env -S node --no-memory-reducer --max-semi-space-size=32',
      ['--no-memory-reducer', '--max-semi-space-size=32'],
    ],
    ['#!/usr/local/bin/node --no-memory-reducer', ['--no-memory-reducer']],
    ['#!/bin/sh', []],
    ['// no #! line', []],
  ];
  for (const [i, [line, flags]] of cases.entries()) {
    const file = join(dir, `bin-${i}.js`);
    writeFileSync(file, `${line}\nconsole.log(1);\n`);
    t.same(shebangNodeFlags(file), flags, line);
  }
});
