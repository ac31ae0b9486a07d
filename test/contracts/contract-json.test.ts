import t from 'tap';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadContract, writeContractJson } from '../../contracts/contract.ts';

// A small document: the mechanism is the same for the 108 KB contract, whose every parse costs
// about half a CPU-second.
const dir = mkdtempSync(join(tmpdir(), 'sluice-contract-json-'));
const yaml = join(dir, 'openapi.yaml');
const json = join(dir, 'openapi.json');
const source =
  'openapi: 3.1.0\ninfo:\n  title: Sluice\n  version: 1.0.0\npaths:\n  /v1/x:\n    get:\n      operationId: x\n';
writeFileSync(yaml, source);
const parsed = {
  openapi: '3.1.0',
  info: { title: 'Sluice', version: '1.0.0' },
  paths: { '/v1/x': { get: { operationId: 'x' } } },
};

t.test('with no JSON form, the YAML is parsed', async (t) => {
  t.same(loadContract(yaml, json), parsed);
});

t.test('the built JSON form is the parsed YAML, and is what loads while the YAML is unchanged', async (t) => {
  writeContractJson(yaml, json);
  t.same(JSON.parse(readFileSync(json, 'utf8')).document, parsed);
  // A marker only the JSON form carries shows which one was read.
  const stored = JSON.parse(readFileSync(json, 'utf8'));
  stored.document.info['x-read-from'] = 'json';
  writeFileSync(json, JSON.stringify(stored));
  t.equal(loadContract(yaml, json).info['x-read-from'], 'json');
});

t.test('each load is a copy of its own: changing one changes no other', async (t) => {
  const a = loadContract(yaml, json);
  a.info.title = 'changed';
  t.equal(loadContract(yaml, json).info.title, 'Sluice');
});

t.test('a YAML changed since the build is parsed again, not read from the stale JSON', async (t) => {
  writeFileSync(yaml, source.replace('title: Sluice', 'title: Edited'));
  const doc = loadContract(yaml, json);
  t.equal(doc.info['x-read-from'], undefined);
  t.equal(doc.info.title, 'Edited');
});

t.test('a torn or foreign JSON file is ignored', async (t) => {
  for (const body of ['{"digest":', '[]', '{"digest":"x","document":{}}']) {
    writeFileSync(json, body);
    t.equal(loadContract(yaml, json).info.title, 'Edited', body);
  }
});
