// Drives the kiwi binary through the published npm SDK, the way an application would.
// Env: KIWI_BIN (the binary), KIWI_WORK (work dir), KIMI_SHARE_DIR (holds config.toml).
// Prints one line per check and a closing "N passed, M failed" line; exits non-zero on failure.
import { createSession, createExternalTool, listSessions, parseSessionEvents } from '@moonshot-ai/kimi-agent-sdk';
import { z } from 'zod';

const bin = process.env.KIWI_BIN;
const work = process.env.KIWI_WORK;
const share = process.env.KIMI_SHARE_DIR;
let passed = 0;
let failed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed += 1;
    console.log(`ok   ${name}`);
  } else {
    failed += 1;
    console.log(`FAIL ${name}${detail === undefined ? '' : `: ${JSON.stringify(detail)}`}`);
  }
}

const lookup = createExternalTool({
  name: 'lookup',
  description: 'Looks a word up.',
  parameters: z.object({ q: z.string() }),
  handler: async ({ q }) => ({ output: `found ${q}`, message: 'looked up' }),
});

const session = createSession({
  workDir: work,
  executable: bin,
  env: { KIMI_SHARE_DIR: share },
  externalTools: [lookup],
  clientInfo: { name: 'kiwi-sdk-check', version: '1.0' },
});

async function runTurn(input, onApproval) {
  const turn = session.prompt(input);
  const events = [];
  for await (const event of turn) {
    events.push(event);
    if (event.type === 'ApprovalRequest') await turn.approve(event.payload.id, onApproval);
  }
  return { events, result: await turn.result };
}

try {
  const first = await runTurn('run the shell', 'approve');
  check('turn with an approval finishes', first.result.status === 'finished', first.result);
  const types = first.events.map((e) => e.type);
  check('approval request reached the SDK', types.includes('ApprovalRequest'), types);
  const shellResult = first.events.find((e) => e.type === 'ToolResult');
  check('approved command ran', shellResult?.payload.return_value.output === 'hi\n', shellResult?.payload);
  check('turn ends with TurnEnd', types[types.length - 1] === 'TurnEnd', types);

  const second = await runTurn('use the tool', 'approve');
  check('external tool turn finishes', second.result.status === 'finished', second.result);
  const toolResult = second.events.find((e) => e.type === 'ToolResult');
  check('external tool answered by the SDK handler', toolResult?.payload.return_value.output === 'found kiwi', toolResult?.payload);
  const text = second.events.filter((e) => e.type === 'ContentPart' && e.payload.type === 'text').map((e) => e.payload.text).join('');
  check('final text streamed', text === 'all done', text);

  const third = await runTurn('reject this', 'reject');
  const rejected = third.events.find((e) => e.type === 'ToolResult');
  check('rejection reported', rejected?.payload.return_value.is_error === true, rejected?.payload);
} catch (err) {
  check('no SDK error', false, String(err?.stack ?? err));
} finally {
  await session.close();
}

const sessions = await listSessions(work);
const mine = sessions.find((s) => s.id === session.sessionId);
check('listSessions finds the session', mine !== undefined, sessions);
check('session brief is the first prompt', mine?.brief === 'run the shell', mine);
const recorded = await parseSessionEvents(work, session.sessionId);
check('parseSessionEvents reads wire.jsonl', recorded.some((e) => e.type === 'TurnBegin'), recorded.map((e) => e.type));

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
