// Drives kiwi's `mcp` subcommands through the published npm SDK: testMCP() on a working and a
// failing server, resetAuthMCP(), and authMCP() on a server without OAuth (which must reject with
// kiwi's stderr). Env: KIWI_BIN (the binary), KIMI_SHARE_DIR (with an mcp.json). Prints one JSON
// line with what the SDK saw.
import { testMCP, authMCP, resetAuthMCP } from '@moonshot-ai/kimi-agent-sdk';

const executable = process.env.KIWI_BIN;
const ok = await testMCP('srv', { executable });
const failed = await testMCP('dies', { executable });
const missing = await testMCP('nope', { executable });
let reset = 'resolved';
await resetAuthMCP('remote', { executable }).catch((e) => { reset = String(e.message ?? e); });
let auth = 'resolved';
await authMCP('srv', { executable }).catch((e) => { auth = String(e.message ?? e); });
console.log(JSON.stringify({ ok, failed, missing, reset, auth }));
