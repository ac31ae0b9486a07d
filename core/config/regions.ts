/** Region settings: this node's region, and the peer ports revocations are pushed to and taken on. */
import { ConfigError } from '../errors.ts';
import { int, peers } from './readers.ts';
import { type Setting, textSetting } from './schema.ts';

export const REGION_SETTINGS = {
  region: {
    section: 'regions',
    vars: [{ env: 'SLUICE_REGION', default: '`local`', doc: "this node's region; tokens of another region get 421" }],
    read(env) {
      const region = env.SLUICE_REGION || 'local';
      if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(region))
        throw new ConfigError('SLUICE_REGION', `must be lowercase letters, digits and dashes, got "${region}"`);
      return region;
    },
  },
  /** Peer ports of the ingress nodes in other regions, pushed every revocation taken here (SLUICE_PEERS). */
  peers: {
    section: 'regions',
    vars: [
      {
        env: 'SLUICE_PEERS',
        default: 'unset',
        doc:
          'comma-separated URLs of the peer ports of the ingress nodes in other regions: a revocation ' +
          'taken here is pushed to them (signed with a key from `SLUICE_MASTER_KEY`) before its audit ' +
          'append, so they refuse the client within one network hop instead of after the Kafka path ' +
          '(`docs/operations.md`, "Regions")',
      },
    ],
    read: (env): readonly string[] => Object.freeze(peers(env)),
  },
  /** This ingress's peer port (SLUICE_PEER_PORT), or null: no pushes received. */
  peerPort: {
    section: 'regions',
    vars: [
      {
        env: 'SLUICE_PEER_PORT',
        default: 'unset (off)',
        doc:
          'the port, on `SLUICE_PEER_HOST`, where an ingress node takes pushed revocations (`POST ' +
          '/revocations`, signed); a pushed revocation holds until its Kafka record arrives, or 5 minutes. ' +
          'One per node: with `--workers N` the first worker to bind it listens and passes each push to the ' +
          'other workers',
      },
    ],
    read: (env) => (env.SLUICE_PEER_PORT ? int(env, 'SLUICE_PEER_PORT', 0, 0, 65535) : null),
  },
  peerHost: textSetting(
    'regions',
    'SLUICE_PEER_HOST',
    '127.0.0.1',
    'listen address of the peer port (`SLUICE_PEER_PORT`): set it to the address the other regions reach',
  ),
} satisfies Record<string, Setting>;
