import t from 'tap';
import { runCommand } from '../../core/run-command.ts';

const node = process.execPath;

t.test('the exit code and what was printed, each stream and both in order', async (t) => {
  const r = await runCommand(node, ['-e', 'process.stdout.write("a");process.stderr.write("b");process.exit(3)']);
  t.equal(r.code, 3);
  t.equal(r.stdout, 'a');
  t.equal(r.stderr, 'b');
  t.equal(r.output.length, 2, 'output holds both');
  t.match(r.output, /a/);
  t.match(r.output, /b/);
});

t.test("stderr: 'inherit' passes stderr through and collects stdout only", async (t) => {
  const r = await runCommand(node, ['-e', 'console.log("path");console.error("progress")'], { stderr: 'inherit' });
  t.equal(r.code, 0);
  t.equal(r.stdout, 'path\n');
  t.equal(r.stderr, '');
});

t.test('a command that cannot start ends with code null and says why', async (t) => {
  const r = await runCommand('/nonexistent/command-of-no-one', []);
  t.equal(r.code, null);
  t.match(r.stderr, /ENOENT/);
});
