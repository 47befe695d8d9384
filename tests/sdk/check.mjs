// Drives the kiwi binary through the published npm SDK, the way an application would.
// Env: KIWI_BIN (the binary), KIWI_WORK (work dir), KIMI_SHARE_DIR (holds config.toml),
// KIWI_HOOK_SHARE (a second share dir with its own scripts, for the hook client's process).
// Prints one line per check and a closing "N passed, M failed" line; exits non-zero on failure.
import {
  createSession,
  createExternalTool,
  listSessions,
  parseSessionEvents,
  ProtocolClient,
} from '@moonshot-ai/kimi-agent-sdk';
import { z } from 'zod';

const bin = process.env.KIWI_BIN;
const work = process.env.KIWI_WORK;
const share = process.env.KIMI_SHARE_DIR;
const hookShare = process.env.KIWI_HOOK_SHARE;
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

// onEvent(turn, event) may act on an event before the next one is read.
async function runTurn(input, onApproval, onEvent) {
  const turn = session.prompt(input);
  const events = [];
  for await (const event of turn) {
    events.push(event);
    if (onEvent) await onEvent(turn, event);
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

  // steer: while the approval waits, more input joins the running turn (wire 1.4/1.5).
  const steered = await runTurn('run it', 'approve', async (turn, event) => {
    if (event.type === 'ApprovalRequest') await turn.steer('and then summarize');
  });
  const steerTypes = steered.events.map((e) => e.type);
  check('steered turn finishes', steered.result.status === 'finished', steered.result);
  const steerInput = steered.events.find((e) => e.type === 'SteerInput');
  check('SteerInput reached the SDK', steerInput?.payload.user_input === 'and then summarize', steerTypes);
  check(
    'the steer comes after the tool result, before the next step',
    steerTypes.indexOf('ToolResult') < steerTypes.indexOf('SteerInput') &&
      steerTypes.indexOf('SteerInput') < steerTypes.lastIndexOf('StepBegin'),
    steerTypes,
  );

  // setPlanMode (wire 1.4).
  check('setPlanMode(true) answered', (await session.setPlanMode(true)) === true);
  check('session.planMode follows', session.planMode === true);
  check('setPlanMode(false) answered', (await session.setPlanMode(false)) === false);

  // A question (wire 1.4): the SDK announced supports_question, kiwi asks, the SDK answers.
  const asked = await runTurn('ask me', 'approve', async (turn, event) => {
    if (event.type === 'QuestionRequest') {
      const q = event.payload.questions[0];
      await turn.respondQuestion(event.payload.id, event.payload.id, { [q.question]: q.options[0].label });
    }
  });
  const question = asked.events.find((e) => e.type === 'QuestionRequest');
  check('QuestionRequest reached the SDK', question?.payload.questions[0]?.question === 'Which color?', question);
  const answer = asked.events.find((e) => e.type === 'ToolResult');
  check('the answer reached the model', answer?.payload.return_value.output === '{"answers": {"Which color?": "Green"}}', answer?.payload);
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

// Hooks (wire 1.7) through the SDK's protocol client: a PreToolUse subscription that blocks.
const client = new ProtocolClient();
try {
  const seen = [];
  const init = await client.start({
    workDir: work,
    executablePath: bin,
    environmentVariables: { KIMI_SHARE_DIR: hookShare },
    hooks: [
      {
        id: 'no-shell',
        event: 'PreToolUse',
        matcher: 'Shell',
        timeout: 10,
        handler: async (request) => {
          seen.push(request);
          return { action: 'block', reason: 'not in this repo' };
        },
      },
    ],
  });
  check('initialize reports the subscription', init.hooks?.configured?.PreToolUse === 1, init.hooks);
  const stream = client.sendPrompt('try the shell');
  const events = [];
  for await (const event of stream.events) events.push(event);
  const result = await stream.result;
  check('hooked turn finishes', result.status === 'finished', result);
  check('the hook handler was asked', seen[0]?.event === 'PreToolUse' && seen[0]?.input_data?.tool_name === 'Shell', seen);
  const types = events.map((e) => e.type);
  check('HookTriggered and HookResolved reached the SDK', types.includes('HookTriggered') && types.includes('HookResolved'), types);
  const blocked = events.find((e) => e.type === 'ToolResult');
  check('the blocked call reads the reason', blocked?.payload.return_value.message === 'not in this repo', blocked?.payload);
} catch (err) {
  check('no SDK error in the hook client', false, String(err?.stack ?? err));
} finally {
  await client.stop();
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
