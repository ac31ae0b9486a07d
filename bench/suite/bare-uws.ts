/**
 * The ceiling: uWebSockets.js (the library Sluice's ingress uses) answering the route with the
 * same body as an empty endpoint list, no auth. `--port P --workers N`; prints "ready".
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import uWS from '@trufflesuite/uws-js-unofficial';
import { onWorkers } from './workers.ts';
import { LIST_BODY } from './route.ts';

const { values } = parseArgs({ options: { port: { type: 'string' }, workers: { type: 'string', default: '1' } } });

await onWorkers(
  Number(values.workers),
  fileURLToPath(import.meta.url),
  () =>
    new Promise<void>((resolve, reject) => {
      uWS
        .App()
        .get('/*', (res) => {
          res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(LIST_BODY);
        })
        .listen('127.0.0.1', Number(values.port), (s) =>
          s ? resolve() : reject(new Error(`cannot listen on ${values.port}`)),
        );
    }),
);
