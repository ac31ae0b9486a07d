/**
 * The Python and Go receiver snippets of docs/webhooks.md, taken from the page as they are, verify
 * real deliveries in both schemes: one before a rotation, one during its overlap (with the new and
 * the old secret), and refuse the same delivery changed by one byte or checked with another
 * secret. Go runs offline (standard library only). A missing interpreter skips its part, saying so.
 */
import t from 'tap';
import { PROJECT_ROOT } from '../../core/paths.ts';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint, type Hit, type TestReceiver } from '../dispatcher/receiver.ts';
import { newEndpointSecret } from '../../outbound/signing.ts';

const root = PROJECT_ROOT;
const doc = readFileSync(join(root, 'docs/webhooks.md'), 'utf8');
function snippet(lang: string): string {
  const m = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``).exec(doc);
  if (!m) throw new Error(`docs/webhooks.md has no ${lang} snippet`);
  return m[1];
}

const work = mkdtempSync(join(tmpdir(), 'sluice-snippets-'));
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
  secret: string;
  scheme: 'sluice' | 'standard';
}

/** Each case, in each scheme, and what the snippets must answer ('ok' or the error). */
async function realCases(): Promise<{ cases: Case[]; expected: Record<string, string> }> {
  const token = await node.token(await node.client('admin', 'snippets'));
  const r = await receiver(200);
  receivers.push(r);
  const ep = await registerEndpoint(node, token, r.url, ['inference.completed']);
  const deliver = async (n: number): Promise<Hit> => {
    const pub = await publish(node, token, { type: 'inference.completed', data: { n } });
    return (await r.until((e) => e.some((h) => h.body.id === pub.json.id), 30_000, `event ${n}`)).find(
      (h) => h.body.id === pub.json.id,
    )!;
  };
  const before = await deliver(1);
  const rotated = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, { token });
  if (rotated.status !== 200) throw new Error(`rotate-secret: ${rotated.status} ${rotated.text}`);
  const during = await deliver(2);

  const cases: Case[] = [];
  const expected: Record<string, string> = {};
  const add = (name: string, hit: Hit, secret: string, want: string, rawBody = hit.rawBody) => {
    const headers = Object.fromEntries(Object.entries(hit.headers).map(([k, v]) => [k, String(v)]));
    for (const scheme of ['sluice', 'standard'] as const) {
      cases.push({
        name: `${name} (${scheme})`,
        body: Buffer.from(rawBody).toString('base64'),
        headers,
        secret,
        scheme,
      });
      expected[`${name} (${scheme})`] = want;
    }
  };
  add('before the rotation', before, ep.secret, 'ok');
  add('during the overlap, new secret', during, rotated.json.secret, 'ok');
  add('during the overlap, old secret', during, ep.secret, 'ok');
  add('another secret', during, newEndpointSecret(), 'SIGNATURE_MISMATCH');
  add('one byte changed', during, rotated.json.secret, 'SIGNATURE_MISMATCH', during.rawBody.replace('"n":2', '"n":3'));
  return { cases, expected };
}

const { cases, expected } = await realCases();
writeFileSync(join(work, 'cases.json'), JSON.stringify(cases));

function available(cmd: string, args: string[]): boolean {
  return spawnSync(cmd, args, { encoding: 'utf8' }).status === 0;
}

t.test('the Python snippet verifies real deliveries in both schemes', async (t) => {
  if (!available('python3', ['--version'])) {
    console.log('# skipped: python3 is not installed on this machine');
    return t.plan(0, 'python3 is not installed');
  }
  writeFileSync(join(work, 'webhook.py'), snippet('python'));
  writeFileSync(
    join(work, 'check.py'),
    `import base64, json, sys
from webhook import verify_webhook, verify_standard_webhook

class Headers(dict):
    """Case-insensitive, as Flask's and Django's are."""
    def get(self, name, default=None):
        return super().get(name.lower(), default)

out = {}
for c in json.load(open(sys.argv[1])):
    verify = verify_webhook if c["scheme"] == "sluice" else verify_standard_webhook
    try:
        headers = Headers({k.lower(): v for k, v in c["headers"].items()})
        body = verify(base64.b64decode(c["body"]), headers, c["secret"])
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

t.test('the Go snippet verifies real deliveries in both schemes (offline, standard library only)', async (t) => {
  if (!available('go', ['version'])) {
    console.log('# skipped: go is not installed on this machine');
    return t.plan(0, 'go is not installed');
  }
  const mod = join(work, 'gocheck');
  mkdirSync(join(mod, 'webhook'), { recursive: true });
  writeFileSync(join(mod, 'go.mod'), 'module gocheck\n\ngo 1.21\n');
  writeFileSync(join(mod, 'webhook', 'webhook.go'), snippet('go'));
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

	"gocheck/webhook"
)

type testCase struct {
	Name    string            \`json:"name"\`
	Body    string            \`json:"body"\`
	Headers map[string]string \`json:"headers"\`
	Secret  string            \`json:"secret"\`
	Scheme  string            \`json:"scheme"\`
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
		verify := webhook.Verify
		if c.Scheme == "standard" {
			verify = webhook.VerifyStandard
		}
		ev, err := verify(body, h, c.Secret, 300*time.Second)
		switch {
		case err != nil:
			out[c.Name] = err.Error()
		case ev.ID != c.Headers["x-service-event-id"]:
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
  // Offline: no module proxy, no toolchain download; the build cache is Go's usual one.
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
