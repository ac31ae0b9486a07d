import t from 'tap';
import { LruMap } from '../../core/lru.ts';

t.test('a full map drops the least recently used entry; get and set make an entry recent', async (t) => {
  const m = new LruMap<string, number>(3);
  m.set('a', 1);
  m.set('b', 2);
  m.set('c', 3);
  t.equal(m.get('a'), 1, 'a read: a is now the most recent');
  m.set('d', 4);
  t.same([m.get('b'), m.size], [undefined, 3], 'b, the least recently used, went');
  m.set('c', 30);
  m.set('e', 5);
  t.same([m.get('a'), m.get('c'), m.get('d'), m.get('e')], [undefined, 30, 4, 5], 'c rewritten stayed; a went');
  t.equal(m.set('f', 6), 6, 'set returns the value');
  m.delete('f');
  t.equal(m.get('f'), undefined);
  m.clear();
  t.equal(m.size, 0);
});
