import t from 'tap';
import { LruMap } from '../../core/lru.ts';

t.test('at most max entries; an entry read or written since the last turn survives the next', async (t) => {
  const m = new LruMap<string, number>(4); // generations of 2
  m.set('a', 1);
  m.set('b', 2);
  m.set('c', 3); // turn: {a, b} old
  t.equal(m.get('a'), 1, 'a read from the old generation: young again');
  m.set('d', 4); // turn: {c, a} old, b dropped
  t.same([m.get('b'), m.size <= 4], [undefined, true], 'b, unused for two turns, went');
  t.same([m.get('a'), m.get('c'), m.get('d')], [1, 3, 4], 'a, c and d stayed');
  m.set('c', 30);
  t.equal(m.get('c'), 30, 'a rewrite replaces the value');
  t.equal(m.set('f', 6), 6, 'set returns the value');
  m.delete('f');
  t.equal(m.get('f'), undefined);
  m.clear();
  t.equal(m.size, 0);
});

t.test('a steady working set that fits stays; the map never passes its bound', async (t) => {
  const m = new LruMap<number, number>(100);
  for (let round = 0; round < 50; round++) {
    for (let k = 0; k < 40; k++) t.equal(m.get(k) ?? m.set(k, k + 1), k + 1);
    m.set(1000 + round, round); // a one-off entry each round
    t.ok(m.size <= 100);
  }
  let hits = 0;
  for (let k = 0; k < 40; k++) if (m.get(k) !== undefined) hits++;
  t.equal(hits, 40, 'the 40 keys read every round are all there');
});
