/**
 * Writes the variables table of docs/configuration.md (between its settings markers) from the
 * settings schema (core/config/, composed by core/config.ts). Usage: npm run docs:config
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { settingsTable } from '../core/config.ts';
import { projectPath } from '../core/paths.ts';
import { pathToFileURL } from 'node:url';

const file = pathToFileURL(projectPath('docs/configuration.md'));
const BLOCK = /(<!-- settings:begin -->\n)[\s\S]*?(\n<!-- settings:end -->)/;

const doc = readFileSync(file, 'utf8');
if (!BLOCK.test(doc))
  throw new Error('docs/configuration.md has no <!-- settings:begin --> … <!-- settings:end --> block');
const updated = doc.replace(BLOCK, (_, begin: string, end: string) => `${begin}${settingsTable()}${end}`);
if (updated === doc) console.log('docs/configuration.md is up to date');
else {
  writeFileSync(file, updated);
  console.log('docs/configuration.md: variables table rewritten');
}
