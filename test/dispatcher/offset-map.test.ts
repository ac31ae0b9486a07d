/**
 * The offsets finished beyond a commit point, as committed beside it (dispatcher/offset-map.ts):
 * what is encoded decodes to the same offsets, what does not fit is left out from the top (only
 * delivered again), and anything that is not our form decodes to nothing (never a skip).
 */
import fc from 'fast-check';
import t from 'tap';
import { decodeFinished, encodeFinished, MAX_METADATA_CHARS } from '../../dispatcher/offset-map.ts';

t.test('round trip', async (t) => {
  t.equal(encodeFinished(100, []), 'r1:');
  t.equal(encodeFinished(100, [102, 103, 107]), 'r1:2.2.3.1');
  t.same(decodeFinished(100, 'r1:2.2.3.1'), [102, 103, 107]);
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 2 ** 40 }),
      fc.uniqueArray(fc.integer({ min: 1, max: 5000 })),
      (base, rel) => {
        const finished = rel.map((r) => base + r).sort((a, b) => a - b);
        const encoded = encodeFinished(base, finished);
        const decoded = decodeFinished(base, encoded);
        // A prefix (all, when it fits) comes back, nothing else.
        return (
          encoded.length <= MAX_METADATA_CHARS &&
          decoded.every((o, i) => o === finished[i]) &&
          (encoded.length < MAX_METADATA_CHARS - 20 ? decoded.length === finished.length : true)
        );
      },
    ),
  );
});

t.test('too many runs: the highest are left out, the rest still decode', async (t) => {
  const every2nd = Array.from({ length: 10_000 }, (_, i) => 1000 + 2 * i + 1);
  const encoded = encodeFinished(1000, every2nd);
  t.ok(encoded.length <= MAX_METADATA_CHARS);
  const decoded = decodeFinished(1000, encoded);
  t.ok(decoded.length > 500 && decoded.length < 10_000, `${decoded.length} of 10,000 kept`);
  t.same(decoded, every2nd.slice(0, decoded.length));
});

t.test('metadata not in our form skips nothing', async (t) => {
  for (const m of [null, '', 'x', 'r1:2', 'r1:2.0', 'r1:-1.2', 'r1:2.2.', 'r2:2.2', 'r1:zzzzzzzzz.1', 'r1:2.2.3'])
    t.same(decodeFinished(0, m), [], JSON.stringify(m));
});
