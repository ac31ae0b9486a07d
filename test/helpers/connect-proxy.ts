/**
 * A real HTTP CONNECT proxy, run as its own process (`node bin/run-ts.js test/helpers/connect-proxy.ts
 * [user:password]`): it prints `listening <port>` once it listens on 127.0.0.1, then one line per
 * tunnel asked for: `CONNECT <host:port> <status>`. With credentials, a CONNECT without the right
 * `Proxy-Authorization: Basic` gets 407. It tunnels bytes both ways and nothing else.
 */
import { connect, createServer, type Socket } from 'node:net';

const credentials = process.argv[2] ?? null;
const expected = credentials ? `Basic ${Buffer.from(credentials).toString('base64')}` : null;

const server = createServer((client: Socket) => {
  let head = Buffer.alloc(0);
  const onData = (d: Buffer) => {
    head = Buffer.concat([head, d]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > 16_384) client.destroy();
      return;
    }
    client.off('data', onData);
    const lines = head.toString('latin1', 0, end).split('\r\n');
    const m = /^CONNECT ([^\s]+):(\d+) HTTP\/1\.1$/.exec(lines[0]);
    const auth = lines.find((l) => /^proxy-authorization:/i.test(l))?.replace(/^[^:]+:\s*/, '') ?? null;
    if (!m) {
      console.log(`BAD ${lines[0]}`);
      client.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    if (expected !== null && auth !== expected) {
      console.log(`CONNECT ${m[1]}:${m[2]} 407`);
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const upstream = connect({ host: m[1], port: Number(m[2]) }, () => {
      console.log(`CONNECT ${m[1]}:${m[2]} 200`);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const rest = head.subarray(end + 4);
      if (rest.length > 0) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.on('error', () => {
      console.log(`CONNECT ${m[1]}:${m[2]} 502`);
      client.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
  };
  client.on('data', onData);
  client.on('error', () => {});
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${(server.address() as { port: number }).port}`));
