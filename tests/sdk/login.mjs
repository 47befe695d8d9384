// Drives kiwi's account subcommands through the published npm SDK, as an application would:
// login() (which parses the `login --json` lines), isLoggedIn(), parseConfig(), logout(), and a
// login() that fails. Env: KIWI_BIN (the binary), KIMI_SHARE_DIR, KIMI_CODE_OAUTH_HOST and
// KIMI_CODE_BASE_URL (the mock). Prints one JSON line with what the SDK saw.
import { login, logout, isLoggedIn, parseConfig } from '@moonshot-ai/kimi-agent-sdk';

const bin = process.env.KIWI_BIN;
const share = process.env.KIMI_SHARE_DIR;
const urls = [];
const first = await login({ executable: bin, onUrl: (url) => urls.push(url) });
const loggedIn = isLoggedIn(share);
const config = parseConfig(share);
const out = await logout({ executable: bin });
const after = isLoggedIn(share);
const failed = await login({ executable: bin, env: { KIMI_CODE_OAUTH_HOST: 'http://127.0.0.1:1' } });
console.log(JSON.stringify({
  first,
  urls,
  loggedIn,
  defaultModel: config.defaultModel,
  models: config.models.map((m) => m.id),
  out,
  after,
  failed,
}));
