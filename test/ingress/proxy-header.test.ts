import t from 'tap';
import { connect } from 'node:net';
import uWS from '@trufflesuite/uws-js-unofficial';
import { privateSocketPath, proxyHeader } from '../../ingress/client-cert-gate.ts';
import { rawHttp } from '../helpers/raw-http.ts';

// The gate's PROXY v2 header, read by the uWS build Sluice runs: every form of address node reports
// comes out as the address uWS itself shows for a direct connection of that family.
t.test('the client-certificate gate names each client in a PROXY v2 header uWS reads back', async (t) => {
  const socket = privateSocketPath();
  const app = uWS.App();
  app.any('/*', (res) => {
    const proxied = Buffer.from(res.getProxiedRemoteAddressAsText()).toString();
    const direct = Buffer.from(res.getRemoteAddressAsText()).toString();
    res.end(`${proxied}|${direct}`);
  });
  const token = await new Promise<uWS.us_listen_socket>((resolve) => app.listen_unix(resolve, socket.path));
  t.ok(token, 'uWS listens on the private socket');
  const tcp = await new Promise<uWS.us_listen_socket>((resolve) => app.listen('::1', 0, resolve));
  t.teardown(() => {
    uWS.us_listen_socket_close(token);
    uWS.us_listen_socket_close(tcp);
    socket.remove();
  });
  const get = 'GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n';
  const read = async (head: Buffer | null) => {
    const r = await rawHttp({ path: socket.path }, head ? Buffer.concat([head, Buffer.from(get)]) : get);
    return r.text.split('\r\n\r\n').at(-1) ?? '';
  };

  for (const [address, shown] of [
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:198.51.100.7', '198.51.100.7'],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
  ]) {
    t.equal(await read(proxyHeader(address, 40_000, 443)), `${shown}|`, `${address} reads back as ${shown}`);
  }
  // uWS writes IPv6 in its own spelling: compare with what it shows for a real connection from ::1.
  const direct = await new Promise<string>((resolve, reject) => {
    const s = connect({ host: '::1', port: uWS.us_socket_local_port(tcp) }, () => s.write(get));
    let text = '';
    s.on('data', (d) => (text += d));
    s.on('error', reject);
    s.on('close', () => resolve(text.split('\r\n\r\n').at(-1)?.split('|')[1] ?? ''));
  });
  t.equal(await read(proxyHeader('::1', 40_000, 443)), `${direct}|`, `::1 reads back as uWS shows ::1 (${direct})`);
  const spelled = (await read(proxyHeader('2001:db8::a:b:1', 1, 443))).split('|')[0];
  t.equal(spelled.replace(/\b0+(?=[0-9a-f])/g, ''), '2001:db8:0:0:0:a:b:1', `2001:db8::a:b:1 (uWS: ${spelled})`);
  const tail = (await read(proxyHeader('fe80::1.2.3.4', 1, 443))).split('|')[0];
  t.equal(tail.replace(/\b0+(?=[0-9a-f])/g, ''), 'fe80:0:0:0:0:0:102:304', `an embedded IPv4 tail (uWS: ${tail})`);

  t.equal(await read(null), '|', 'a connection without the header has no proxied address (the adapter serves none)');
  t.throws(() => proxyHeader('not an address', 1, 1), /not an IP address/, 'anything else is refused');
});
