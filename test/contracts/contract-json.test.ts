import t from 'tap';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { CONTRACT_PATH, loadContract, writeContractJson } from '../../contracts/contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'sluice-contract-json-'));
const yaml = join(dir, 'openapi.yaml');
const json = join(dir, 'openapi.json');
writeFileSync(yaml, readFileSync(CONTRACT_PATH));
const fromYaml = parse(readFileSync(CONTRACT_PATH, 'utf8'));

t.test('with no JSON form, the YAML is parsed', async (t) => {
  t.same(loadContract(yaml, json), fromYaml);
});

t.test('the built JSON form is the parsed YAML, and is what loads while the YAML is unchanged', async (t) => {
  writeContractJson(yaml, json);
  t.same(JSON.parse(readFileSync(json, 'utf8')).document, fromYaml);
  // A marker only the JSON form carries shows which one was read.
  const stored = JSON.parse(readFileSync(json, 'utf8'));
  stored.document.info['x-read-from'] = 'json';
  writeFileSync(json, JSON.stringify(stored));
  t.equal(loadContract(yaml, json).info['x-read-from'], 'json');
});

t.test('each load is a copy of its own: changing one changes no other', async (t) => {
  const a = loadContract(yaml, json);
  a.info.title = 'changed';
  t.not(loadContract(yaml, json).info.title, 'changed');
});

t.test('a YAML changed since the build is parsed again, not read from the stale JSON', async (t) => {
  writeFileSync(yaml, readFileSync(CONTRACT_PATH, 'utf8').replace(/^(\s+title:).*$/m, '$1 Edited'));
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
