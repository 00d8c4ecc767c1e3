// A real identity provider for the OAuth tests: npm `oidc-provider` (a certified OpenID
// provider) on 127.0.0.1, issuing JWT access tokens (RFC 9068) for any resource indicator.
//
// Usage: node idp.mjs --port N --keys FILE [--key-ids k2,k1] [--token-ttl SECONDS]
//
// - Keys: FILE holds private JWKs by id; ids missing from it are generated and saved, so a
//   restart with `--key-ids k2,k1` is a key rotation: k2 signs from then on, k1 still
//   verifies. Only the listed ids are published at the JWKS.
// - Clients: `machine` / `machine-secret` may use client_credentials; any client may
//   register itself (RFC 7591), as the MCP SDKs do.
// - Nobody has to click: an authorization request signs in account `alice` (or the
//   account its `login_hint` names, so a test can sign in several people) and grants
//   every scope asked for, then redirects back with the code at once. `login_hint=refuse`
//   is a person who refuses: the redirect carries `error=access_denied`.
// - Token exchange (RFC 8693): client `exchanger` / `exchanger-secret` may trade an access
//   token this provider issued (or forged, below: it checks the signature with the
//   published keys and the issuer) for one whose audience is the `resource` asked for,
//   with the same subject; GET /test/exchanges counts the exchanges done.
// - GET /test/forge?claims=JSON&key=ID[&kid=KID] signs a token the provider never issued:
//   the claims (defaults: iss, sub alice, iat, exp in 5 min) with key ID (`stranger` is a
//   key that is never published), header kid KID (default ID). The refusal tests use it.
//
// Prints `ready <issuer>` on stdout once it listens.

import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { parseArgs } from 'node:util';

const peers = new URL('../peers/node_modules/', import.meta.url);
const { default: Provider } = await import(new URL('oidc-provider/lib/index.js', peers));
const jose = await import(new URL('jose/dist/webapi/index.js', peers));

const { values: opts } = parseArgs({
  options: {
    port: { type: 'string' },
    keys: { type: 'string' },
    'key-ids': { type: 'string', default: 'k1' },
    'token-ttl': { type: 'string', default: '300' },
  },
});
const issuer = `http://127.0.0.1:${opts.port}`;
const tokenTtl = Number(opts['token-ttl']);

async function newKey(kid) {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  return { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
let exchanges = 0;

const stored = existsSync(opts.keys) ? JSON.parse(readFileSync(opts.keys, 'utf8')) : {};
const published = [];
for (const kid of opts['key-ids'].split(',')) {
  stored[kid] ??= await newKey(kid);
  published.push(stored[kid]);
}
stored.stranger ??= await newKey('stranger');
writeFileSync(opts.keys, JSON.stringify(stored), { mode: 0o600 });

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'exchanger',
      client_secret: 'exchanger-secret',
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: [TOKEN_EXCHANGE],
      redirect_uris: [],
      response_types: [],
    },
    {
      client_id: 'machine',
      client_secret: 'machine-secret',
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
  ],
  jwks: { keys: published },
  scopes: ['openid', 'offline_access', 'mcp:read', 'mcp:admin'],
  findAccount: async (_ctx, accountId) => ({ accountId, claims: async () => ({ sub: accountId }) }),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: 'mcp:read mcp:admin',
        audience: resource,
        accessTokenTTL: tokenTtl,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  ttl: { AccessToken: tokenTtl, ClientCredentials: tokenTtl },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});
provider.proxy = false;

const publishedKeys = jose.createLocalJWKSet({
  keys: published.map(({ d, p, q, dp, dq, qi, ...pub }) => pub),
});
provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
  const { subject_token: subject, subject_token_type: type, resource, scope } = ctx.oidc.params;
  const refuse = (error, description) => {
    ctx.status = 400;
    ctx.body = { error, error_description: description };
  };
  if (type !== ACCESS_TOKEN_TYPE || !subject) return refuse('invalid_request', 'an access token is exchanged');
  if (!resource) return refuse('invalid_target', 'name the resource');
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(subject, publishedKeys, { issuer }));
  } catch (error) {
    return refuse('invalid_grant', `the subject token does not verify: ${error.message}`);
  }
  exchanges += 1;
  const now = Math.floor(Date.now() / 1000);
  const key = await jose.importJWK(published[0], 'RS256');
  const granted = scope ?? 'mcp:read';
  const token = await new jose.SignJWT({
    sub: claims.sub, client_id: ctx.oidc.client.clientId, scope: granted,
    jti: crypto.randomUUID(), act: { sub: ctx.oidc.client.clientId },
  })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: published[0].kid })
    .setIssuer(issuer).setAudience(resource).setIssuedAt(now).setExpirationTime(now + tokenTtl)
    .sign(key);
  ctx.body = {
    access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer',
    expires_in: tokenTtl, scope: granted,
  };
}, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope'], ['resource']);

provider.use(async (ctx, next) => {
  if (ctx.path.startsWith('/interaction/')) {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    let result;
    if (details.params.login_hint === 'refuse') {
      result = { error: 'access_denied', error_description: 'the person refused' };
    } else if (details.prompt.name === 'login') {
      result = { login: { accountId: details.params.login_hint ?? 'alice' } };
    } else {
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      const missing = details.prompt.details;
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
        grant.addResourceScope(resource, scopes.join(' '));
      }
      result = { consent: { grantId: await grant.save() } };
    }
    const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
    ctx.redirect(to);
    return;
  }
  if (ctx.path === '/test/exchanges') {
    ctx.body = String(exchanges);
    return;
  }
  if (ctx.path === '/test/forge') {
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: issuer, sub: 'alice', iat: now, exp: now + 300, ...JSON.parse(ctx.query.claims ?? '{}') };
    const key = stored[ctx.query.key ?? published[0].kid];
    const signing = await jose.importJWK(key, 'RS256');
    ctx.body = await new jose.SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: ctx.query.kid ?? key.kid })
      .sign(signing);
    return;
  }
  await next();
});

const server = provider.listen(Number(opts.port), '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
