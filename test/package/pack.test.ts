/**
 * The package receivers install: `npm run build` then `npm pack` of its output, installed with npm
 * (offline: it has no dependencies) into an empty temporary project, where plain `node` (no tsx,
 * no loader) imports `sluice/webhooks` and verifies a delivery in both schemes, and a consumer's
 * TypeScript type-checks against the shipped declarations.
 */
import t from 'tap';
import { PROJECT_ROOT } from '../../core/paths.ts';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newEndpointSecret, signDelivery } from '../../outbound/signing.ts';

const root = PROJECT_ROOT;
const work = mkdtempSync(join(tmpdir(), 'sluice-pack-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

// Children run plain: nothing of the test runner's loaders leaks into them.
const { NODE_OPTIONS: _o, ...plainEnv } = process.env;
function run(cmd: string, args: string[], cwd: string) {
  const res = spawnSync(cmd, args, { cwd, env: plainEnv, encoding: 'utf8', timeout: 180_000 });
  if (res.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${res.status}):\n${res.stdout}\n${res.stderr}`);
  return res.stdout;
}
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

t.test(
  'npm run build; npm pack; npm install --offline in an empty project; plain node verifies both schemes',
  async (t) => {
    // `npm run build`, into a directory of its own (other test files import dist/ meanwhile).
    const built = join(work, 'dist');
    run(process.execPath, [join(root, 'bin/run-ts.js'), join(root, 'scripts/build.ts'), built], root);
    const packed = JSON.parse(run(npm, ['pack', built, '--pack-destination', work, '--json'], root)) as {
      filename: string;
      files: { path: string }[];
    }[];
    const tarball = join(work, packed[0].filename);
    const files = packed[0].files.map((f) => f.path);
    for (const f of [
      'package.json',
      'receiver-sdk/verify.js',
      'receiver-sdk/verify.d.ts',
      'receiver-sdk/index.js',
      'receiver-sdk/index.d.ts',
    ])
      t.ok(files.includes(f), `the tarball has ${f}`);
    t.notOk(
      files.some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')),
      'no TypeScript sources',
    );

    const app = join(work, 'receiver-app');
    run('mkdir', ['-p', app], work);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'receiver-app', version: '1.0.0', private: true, type: 'module' }),
    );
    run(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], app);
    const manifest = JSON.parse(readFileSync(join(app, 'node_modules/sluice/package.json'), 'utf8'));
    t.same(manifest.dependencies ?? {}, {}, 'the installed package has no dependencies');

    // A delivery signed during a rotation (both secrets), as the dispatcher signs it.
    const [current, previous] = [newEndpointSecret(), newEndpointSecret()];
    const signed = signDelivery(
      { current, previous },
      { id: 'evt_pack', type: 'inference.completed', tenant_id: 'acme', data: { ok: true }, created_at: Date.now() },
      1,
      Date.now(),
    );
    writeFileSync(join(app, 'delivery.json'), JSON.stringify({ ...signed, current, previous }));
    writeFileSync(
      join(app, 'check.mjs'),
      `import { readFileSync } from 'node:fs';
import { verifyWebhook, WebhookVerificationError } from 'sluice/webhooks';
import * as main from 'sluice';
const d = JSON.parse(readFileSync('delivery.json', 'utf8'));
const out = {};
for (const scheme of ['sluice', 'standard']) {
  for (const secret of ['current', 'previous']) {
    out[scheme + ':' + secret] = verifyWebhook(d.rawBody, d.headers, d[secret], { scheme }).id;
  }
  try {
    verifyWebhook(d.rawBody.replace('"ok":true', '"ok":tru3'), d.headers, d.current, { scheme });
    out[scheme + ':tampered'] = 'accepted';
  } catch (err) {
    out[scheme + ':tampered'] = err instanceof WebhookVerificationError ? err.code : String(err);
  }
}
out.main = main.verifyWebhook === verifyWebhook;
console.log(JSON.stringify(out));
`,
    );
    const out = JSON.parse(run(process.execPath, ['check.mjs'], app));
    t.same(out, {
      'sluice:current': 'evt_pack',
      'sluice:previous': 'evt_pack',
      'sluice:tampered': 'SIGNATURE_MISMATCH',
      'standard:current': 'evt_pack',
      'standard:previous': 'evt_pack',
      'standard:tampered': 'SIGNATURE_MISMATCH',
      main: true,
    });

    // The declarations work for a TypeScript consumer (strict, NodeNext, no .ts-extension imports).
    writeFileSync(
      join(app, 'consumer.ts'),
      "import { verifyWebhook, type WebhookBody } from 'sluice/webhooks';\n" +
        'export const check = (b: Buffer, h: Record<string, string>, s: string): WebhookBody =>' +
        " verifyWebhook(b, h, [s], { scheme: 'standard' });\n",
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          noEmit: true,
          types: [],
          typeRoots: [join(root, 'node_modules/@types')],
        },
        files: ['consumer.ts'],
      }),
    );
    run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', app, '--types', 'node'], app);
    t.pass('a consumer type-checks against the shipped .d.ts');
  },
);
