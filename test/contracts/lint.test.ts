import t from 'tap';
import { readFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { Validator } from '@seriousme/openapi-schema-validator';
import { loadContract, listOperations, CONTRACT_PATH } from '../../contracts/contract.ts';
import { ContractSchemas } from '../../contracts/schemas.ts';
import { KNOWN_EVENT_KINDS } from '../../core/webhooks/records.ts';
import { ALL_SCOPES } from '../../core/scopes.ts';
import { ERRORS } from '../../core/errors.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;
const doc = loadContract();
const ops = listOperations(doc);

t.test('the contract is a valid OpenAPI 3.1 document (refs resolved)', async (t) => {
  const v = new Validator();
  const res = await v.validate(doc);
  t.equal(v.version, '3.1');
  t.same(res.errors ?? [], [], 'no validation errors');
  t.ok(res.valid);
});

t.test('a broken contract is refused by the same lint', async (t) => {
  const broken = loadContract();
  broken.paths['/v1/auth/jwks'].get.responses['200'].content['application/json'].schema = {
    $ref: '#/components/schemas/NoSuchSchema',
  };
  const res = await new Validator().validate(broken);
  t.notOk(res.valid);
});

t.test('operations: unique ids, a scope each, the auth errors documented on every secured one', async (t) => {
  const ids = ops.map((o) => o.operationId);
  t.equal(new Set(ids).size, ids.length, 'operationIds are unique');
  for (const op of ops) {
    if (op.scopes === null) continue;
    t.equal(op.scopes.length, 1, `${op.operationId} needs exactly one scope`);
    for (const status of ['401', '403', '421', '503'])
      t.ok(op.responses[status], `${op.operationId} documents ${status}`);
    t.ok(
      op.responses['401'].headers?.['WWW-Authenticate']?.required,
      `${op.operationId}: 401 carries WWW-Authenticate`,
    );
    t.ok(op.responses['503'].headers?.['Retry-After']?.required, `${op.operationId}: 503 carries Retry-After`);
    if (op.requestBody?.content['application/json']) {
      for (const status of ['400', '413', '415']) t.ok(op.responses[status], `${op.operationId} documents ${status}`);
    }
  }
});

t.test('the contract agrees with the code: scopes, event kinds, error codes, limits', async (t) => {
  t.same(
    Object.keys(doc.components.securitySchemes.oauth2.flows.clientCredentials.scopes).sort(),
    [...ALL_SCOPES].sort(),
  );
  t.equal(doc.components.securitySchemes.oauth2.flows.clientCredentials.tokenUrl, '/v1/auth/token');
  t.same(doc.components.schemas.EventKind.enum, [...KNOWN_EVENT_KINDS]);
  t.same(Object.keys(doc.webhooks), [...KNOWN_EVENT_KINDS], 'one webhook payload per event kind');
  t.same(doc.components.schemas.ErrorCode.enum.sort(), Object.keys(ERRORS).sort());
  t.equal(doc.components.schemas.TokenResponse.properties.expires_in.const, 900);
  t.equal(doc.components.schemas.DlqEntry.properties.attempts.maximum, 17);
  t.same([doc.components.parameters.Limit.schema.minimum, doc.components.parameters.Limit.schema.maximum], [1, 1000]);
});

t.test('links point at operations that exist', async (t) => {
  const ids = new Set(ops.map((o) => o.operationId));
  let links = 0;
  for (const op of ops) {
    for (const r of Object.values(op.responses)) {
      for (const link of Object.values<any>((r as any).links ?? {})) {
        links++;
        t.ok(ids.has(link.operationId), `link to ${link.operationId}`);
      }
    }
  }
  t.ok(links >= 3, 'create → read, verify, delete');
});

t.test('every schema compiles under JSON Schema 2020-12 and examples validate', async (t) => {
  const schemas = new ContractSchemas(doc);
  for (const name of Object.keys(doc.components.schemas))
    t.doesNotThrow(() => schemas.errors(`#/components/schemas/${name}`, null), name);
  for (const op of ops) {
    for (const media of Object.values(op.requestBody?.content ?? {})) {
      const ex = (media as any).example;
      if (ex !== undefined && (media as any).schema)
        t.same(schemas.errors((media as any).schema, ex), [], `${op.operationId} example`);
    }
  }
});

t.test('contracts/generated/types.ts is current (npm run contract:types regenerates it)', async (t) => {
  const out = join(mkdtempSync(join(tmpdir(), 'sluice-types-')), 'types.ts');
  execFileSync(join(root, 'node_modules/.bin/openapi-typescript'), [CONTRACT_PATH, '-o', out], {
    cwd: root,
    stdio: 'pipe',
  });
  t.equal(readFileSync(join(root, 'contracts/generated/types.ts'), 'utf8'), readFileSync(out, 'utf8'));
});
