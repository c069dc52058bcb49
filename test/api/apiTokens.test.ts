import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { ConfigError } from '../../src/errors.js';
import { Secrets } from '../../src/secrets.js';
import { bearerToken, createTokenLookup } from '../../src/api/tokens.js';

const TOKEN = 'tok-0123456789abcdef';

function failure(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('api.tokens in the config file', () => {
  it('expands ${VAR} in token keys and maps each token to its user', () => {
    const secrets = new Secrets();
    const config = parseConfigFile({ api: { tokens: { '${OPS_TOKEN}': 'alice', '${BOB_TOKEN}': 'bob' } } }, { OPS_TOKEN: TOKEN, BOB_TOKEN: `${TOKEN}-bob` }, 'c.json', secrets);
    expect(config.api).toEqual({ tokens: { [TOKEN]: 'alice', [`${TOKEN}-bob`]: 'bob' } });
    expect(secrets.redact(`Bearer ${TOKEN}`)).toBe('Bearer [redacted]');
    const lookup = createTokenLookup(config.api);
    expect(lookup.enabled).toBe(true);
    expect(lookup.userFor(TOKEN)).toBe('alice');
    expect(lookup.userFor(`${TOKEN}-bob`)).toBe('bob');
    expect(lookup.userFor('tok-wrong')).toBeUndefined();
  });

  it('treats a literal token as a secret too', () => {
    const secrets = new Secrets();
    parseConfigFile({ api: { tokens: { [TOKEN]: 'alice' } } }, {}, 'c.json', secrets);
    expect(secrets.appearsIn(TOKEN)).toBe(true);
  });

  it('names the missing variable of a token without naming any token', () => {
    const err = failure(() => parseConfigFile({ api: { tokens: { '${OPS_TOKEN}': 'alice' } } }, {}));
    expect(err.issues).toEqual([{ path: 'api.tokens', message: 'environment variable OPS_TOKEN is not set' }]);
  });

  it('refuses short tokens, empty users and unknown keys without printing the token', () => {
    const short = 'short-tok';
    const err = failure(() => parseConfigFile({ api: { tokens: { [short]: 'alice', [TOKEN]: '' }, extra: 1 } }, {}));
    expect(err.issues.map((i) => i.path).sort()).toEqual(['api.extra', 'api.tokens', 'api.tokens']);
    expect(err.message).toContain('the token of user "alice" is shorter than 16 characters');
    expect(err.message).not.toContain(short);
    expect(err.message).not.toContain(TOKEN);
  });

  it('reads api.admins, the users who may cancel and retry any workflow, and refuses anything but user names', () => {
    expect(parseConfigFile({ api: { admins: ['alice', 'ops'] } }).api).toEqual({ admins: ['alice', 'ops'] });
    expect(parseConfigFile({ api: { tokens: { [TOKEN]: 'alice' }, admins: ['alice'] } }).api).toEqual({ tokens: { [TOKEN]: 'alice' }, admins: ['alice'] });
    for (const admins of ['alice', [''], [1], { alice: true }]) {
      const err = failure(() => parseConfigFile({ api: { admins } }));
      expect(err.issues).toEqual([{ path: 'api.admins', message: 'expected an array of user names (non-empty strings), e.g. ["alice"]' }]);
    }
  });

  it('is absent without an api section, and a lookup without tokens is disabled', () => {
    expect(parseConfigFile({}).api).toBeUndefined();
    expect(createTokenLookup(undefined).enabled).toBe(false);
    expect(createTokenLookup(undefined).userFor(TOKEN)).toBeUndefined();
  });

  it('reads the token of a Bearer header', () => {
    expect(bearerToken(`Bearer ${TOKEN}`)).toBe(TOKEN);
    expect(bearerToken(`bearer  ${TOKEN} `)).toBe(TOKEN);
    expect(bearerToken(`Basic ${TOKEN}`)).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
