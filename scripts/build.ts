/**
 * `npm run build`: compiles the receiver SDK (receiver-sdk/index.ts and verify.ts, with what they
 * import: node built-ins and a few core modules) to JavaScript with type declarations in dist/,
 * and writes dist/package.json: the package receivers install (`npm run pack` packs it). It has
 * no dependencies. The server is built apart (`npm run build:server`, into build/).
 * `node bin/run-ts.js scripts/build.ts <dir>` builds into another directory (the pack test does,
 * so it never pulls dist/ from under test files that import it).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PROJECT_ROOT } from '../core/paths.ts';

const root = PROJECT_ROOT;
const dist = resolve(process.argv[2] ?? join(root, 'dist'));

rmSync(dist, { recursive: true, force: true });
const tsc = spawnSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', dist],
  { stdio: 'inherit' },
);
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

// tsc rewrites `./x.ts` to `./x.js` in the JavaScript, not in the declarations: do it there too,
// so a consumer's TypeScript resolves them without allowImportingTsExtensions.
function* files(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) yield* files(join(dir, e.name));
    else yield join(dir, e.name);
  }
}
for (const f of files(dist)) {
  if (!f.endsWith('.d.ts')) continue;
  writeFileSync(f, readFileSync(f, 'utf8').replace(/(from\s+['"]\.{1,2}\/[^'"]*?)\.ts(['"])/g, '$1.js$2'));
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  engines: unknown;
};
const entry = (path: string) => ({ types: `./receiver-sdk/${path}.d.ts`, default: `./receiver-sdk/${path}.js` });
const manifest = {
  name: pkg.name,
  version: pkg.version,
  description: 'Verify Sluice webhooks (Sluice signatures and Standard Webhooks) in plain Node',
  type: 'module',
  engines: pkg.engines,
  exports: { '.': entry('index'), './webhooks': entry('verify') },
  types: './receiver-sdk/index.d.ts',
  // Every folder tsc wrote: the SDK and the few server files it reaches (test/core/layering.test.ts).
  files: readdirSync(dist, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? [e.name] : [])),
  sideEffects: false,
};
writeFileSync(join(dist, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
writeFileSync(
  join(dist, 'README.md'),
  `# ${pkg.name}\n\n\`import { verifyWebhook } from '${pkg.name}/webhooks'\`: ` +
    'see docs/webhooks.md in the Sluice repository.\n',
);
console.log(`built ${dist}`);
