// `g4c chat` through a pipe: answers stream to stdout, /reset forgets the conversation (the
// same first question after /reset gets the same greedy answer as before it), and each answer
// equals the server's /v1/chat/completions answer to the same messages.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { BIN, MODEL, startServer, waitExit, request, check } from './lib.mjs';

const g4c = path.join(BIN, 'bin/g4c');
const run = spawnSync(g4c, ['chat', '--model', MODEL, '--threads', '2', '--max-tokens', '10'],
  { input: 'Hello there\nAnd then?\n/reset\nHello there\n', encoding: 'utf8', timeout: 240000 });
if (run.status !== 0 && /no chat template/.test(run.stderr)) { console.log('chat: SKIPPED (' + run.stderr.trim() + ')'); process.exit(77); }
check(run.status === 0, `g4c chat exit ${run.status}: ${run.stderr}`);

const srv = await startServer();
try {
  const ask = async (messages) => {
    const r = await request(srv.port, 'POST', '/v1/chat/completions', { messages, max_tokens: 10, temperature: 0 });
    check(r.status === 200, r.body);
    return JSON.parse(r.body).choices[0].message.content;
  };
  const s1 = await ask([{ role: 'user', content: 'Hello there' }]);
  const s2 = await ask([{ role: 'user', content: 'Hello there' }, { role: 'assistant', content: s1 }, { role: 'user', content: 'And then?' }]);
  // Turn 1, turn 2 (history kept), /reset, turn 1 again (history gone).
  const want = `${s1}\n${s2}\n(conversation reset)\n${s1}\n`;
  check(run.stdout === want, `chat printed ${JSON.stringify(run.stdout)}, the server answers ${JSON.stringify(want)}`);
} finally {
  srv.proc.kill('SIGTERM');
  await waitExit(srv.proc);
}
console.log('chat pipe test passed');
