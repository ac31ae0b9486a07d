/**
 * The `v1a` (ed25519) receiver snippets of docs/webhooks.md (node:crypto, Python with
 * `cryptography`, Go with crypto/ed25519), taken from the page as they are, verify real deliveries
 * of an `ed25519` endpoint: one before a rotation, one during its overlap (with the new and the old
 * public key), and refuse another key and a body changed by one byte. A missing interpreter or
 * Python module skips its part, saying so.
 */
import t from 'tap';
import { PROJECT_ROOT } from '../../core/paths.ts';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, type Hit, type TestReceiver } from '../dispatcher/receiver.ts';
import { newSigningKeyPair } from '../../core/webhooks/signing-keys.ts';

const root = PROJECT_ROOT;
const doc = readFileSync(join(root, 'docs/webhooks.md'), 'utf8');
function snippet(tag: string): string {
  const m = new RegExp(`\`\`\`${tag}\\n([\\s\\S]*?)\`\`\``).exec(doc);
  if (!m) throw new Error(`docs/webhooks.md has no ${tag} snippet`);
  return m[1];
}

const work = mkdtempSync(join(tmpdir(), 'sluice-snippets-v1a-'));
const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
  rmSync(work, { recursive: true, force: true });
});

interface Case {
  name: string;
  body: string; // base64 of the raw body
  headers: Record<string, string>;
  key: string;
}

async function realCases(): Promise<{ cases: Case[]; expected: Record<string, string> }> {
  const token = await node.token(await node.client('admin', 'snippets-v1a'));
  const r = await receiver(200);
  receivers.push(r);
  const reg = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: r.url, events: ['inference.completed'], signing: 'ed25519' },
  });
  if (reg.status !== 201) throw new Error(`registration: ${reg.status} ${reg.text}`);
  const deliver = async (n: number): Promise<Hit> => {
    const pub = await publish(node, token, { type: 'inference.completed', data: { n } });
    return (await r.until((e) => e.some((h) => h.body.id === pub.json.id), 30_000, `event ${n}`)).find(
      (h) => h.body.id === pub.json.id,
    )!;
  };
  const before = await deliver(1);
  const rotated = await call(node.base, 'POST', `/v1/webhooks/endpoints/${reg.json.id}/rotate-secret`, { token });
  if (rotated.status !== 200) throw new Error(`rotate-secret: ${rotated.status} ${rotated.text}`);
  const during = await deliver(2);

  const cases: Case[] = [];
  const expected: Record<string, string> = {};
  const add = (name: string, hit: Hit, key: string, want: string, rawBody = hit.rawBody) => {
    const headers = Object.fromEntries(Object.entries(hit.headers).map(([k, v]) => [k, String(v)]));
    cases.push({ name, body: Buffer.from(rawBody).toString('base64'), headers, key });
    expected[name] = want;
  };
  const oldKey = reg.json.signing_public_key as string;
  const newKey = rotated.json.signing_public_key as string;
  add('before the rotation', before, oldKey, 'ok');
  add('during the overlap, new key', during, newKey, 'ok');
  add('during the overlap, old key', during, oldKey, 'ok');
  add('another key', during, newSigningKeyPair().publicKey, 'SIGNATURE_MISMATCH');
  add('one byte changed', during, newKey, 'SIGNATURE_MISMATCH', during.rawBody.replace('"n":2', '"n":3'));
  return { cases, expected };
}

const { cases, expected } = await realCases();
writeFileSync(join(work, 'cases.json'), JSON.stringify(cases));

const available = (cmd: string, args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' }).status === 0;

t.test('the node:crypto snippet verifies real v1a deliveries', async (t) => {
  writeFileSync(join(work, 'v1a.mjs'), snippet('js v1a'));
  writeFileSync(
    join(work, 'check.mjs'),
    `import { readFileSync } from 'node:fs';
import { verifyV1a } from './v1a.mjs';
const out = {};
for (const c of JSON.parse(readFileSync(process.argv[2], 'utf8'))) {
  try {
    const body = verifyV1a(Buffer.from(c.body, 'base64'), c.headers, c.key);
    out[c.name] = body.id === c.headers['x-service-event-id'] ? 'ok' : 'wrong body';
  } catch (e) {
    out[c.name] = e.message;
  }
}
console.log(JSON.stringify(out));
`,
  );
  const res = spawnSync(process.execPath, ['check.mjs', 'cases.json'], { cwd: work, encoding: 'utf8' });
  t.equal(res.status, 0, res.stderr);
  t.same(JSON.parse(res.stdout), expected);
});

t.test('the Python snippet (cryptography) verifies real v1a deliveries', async (t) => {
  if (!available('python3', ['--version'])) {
    console.log('# skipped: python3 is not installed on this machine');
    return t.plan(0, 'python3 is not installed');
  }
  if (!available('python3', ['-c', 'import cryptography'])) {
    console.log("# skipped: python3's cryptography is not installed (apt-get install python3-cryptography)");
    return t.plan(0, "python3's cryptography is not installed");
  }
  writeFileSync(join(work, 'webhook_v1a.py'), snippet('python v1a'));
  writeFileSync(
    join(work, 'check.py'),
    `import base64, json, sys
from webhook_v1a import verify_v1a

class Headers(dict):
    """Case-insensitive, as Flask's and Django's are."""
    def get(self, name, default=None):
        return super().get(name.lower(), default)

out = {}
for c in json.load(open(sys.argv[1])):
    try:
        headers = Headers({k.lower(): v for k, v in c["headers"].items()})
        body = verify_v1a(base64.b64decode(c["body"]), headers, c["key"])
        out[c["name"]] = "ok" if body["id"] == c["headers"]["x-service-event-id"] else "wrong body"
    except ValueError as e:
        out[c["name"]] = str(e)
print(json.dumps(out))
`,
  );
  const res = spawnSync('python3', ['check.py', 'cases.json'], { cwd: work, encoding: 'utf8', timeout: 60_000 });
  t.equal(res.status, 0, res.stderr);
  t.same(JSON.parse(res.stdout), expected);
});

t.test('the Go snippet (crypto/ed25519) verifies real v1a deliveries, offline', async (t) => {
  if (!available('go', ['version'])) {
    console.log('# skipped: go is not installed on this machine');
    return t.plan(0, 'go is not installed');
  }
  const mod = join(work, 'gocheck');
  mkdirSync(join(mod, 'webhookv1a'), { recursive: true });
  writeFileSync(join(mod, 'go.mod'), 'module gocheck\n\ngo 1.21\n');
  writeFileSync(join(mod, 'webhookv1a', 'v1a.go'), snippet('go v1a'));
  writeFileSync(
    join(mod, 'main.go'),
    `package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"gocheck/webhookv1a"
)

type testCase struct {
	Name    string            \`json:"name"\`
	Body    string            \`json:"body"\`
	Headers map[string]string \`json:"headers"\`
	Key     string            \`json:"key"\`
}

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		panic(err)
	}
	out := map[string]string{}
	for _, c := range cases {
		body, _ := base64.StdEncoding.DecodeString(c.Body)
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		ev, err := webhookv1a.VerifyV1a(body, h, c.Key, 300*time.Second)
		switch {
		case err != nil:
			out[c.Name] = err.Error()
		case ev["id"] != c.Headers["x-service-event-id"]:
			out[c.Name] = "wrong body"
		default:
			out[c.Name] = "ok"
		}
	}
	enc, _ := json.Marshal(out)
	fmt.Println(string(enc))
}
`,
  );
  const env = {
    ...process.env,
    GOPROXY: 'off',
    GOTOOLCHAIN: 'local',
    GOFLAGS: '-mod=mod -buildvcs=false',
    GO111MODULE: 'on',
  };
  const res = spawnSync('go', ['run', '.', join(work, 'cases.json')], {
    cwd: mod,
    env,
    encoding: 'utf8',
    timeout: 240_000,
  });
  t.equal(res.status, 0, res.stderr);
  t.same(JSON.parse(res.stdout), expected);
});
