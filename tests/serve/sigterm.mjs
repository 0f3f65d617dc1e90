// SIGTERM during load: the server stops taking requests, finishes the running ones and exits 0;
// no client sees a half-written answer (each is a complete JSON / SSE stream ending in
// [DONE], or a refused connection / 503 for requests that came after the signal).
import { startServer, waitExit, request, parseSse, check, fail, PROMPTS } from './lib.mjs';

const srv = await startServer(['--batch-size', '4']);
const results = [];
let signalled = false;
const clients = Array.from({ length: 24 }, async (_, i) => {
  await new Promise((r) => setTimeout(r, i * 40));
  const stream = i % 2 === 0;
  const r = await request(srv.port, 'POST', '/v1/completions',
    { prompt: PROMPTS[i % PROMPTS.length], max_tokens: 24, ignore_eos: true, temperature: 0, stream },
    { onData: () => { if (!signalled && i >= 4) { signalled = true; srv.proc.kill('SIGTERM'); } } });
  results.push({ i, stream, r });
});
await Promise.all(clients);
const { code, signal } = await waitExit(srv.proc);
check(code === 0, `exit status ${code} (signal ${signal})\n` + srv.stderr());
let complete = 0, refused = 0;
for (const { i, stream, r } of results) {
  if (r.status === 0 || r.status === 503) { ++refused; continue; }
  check(r.status === 200 && r.complete, `#${i}: status ${r.status}, complete ${r.complete}: ${r.body.slice(-200)}`);
  if (stream) {
    const s = parseSse(r.body);
    check(s.done && s.wellFormed && s.finish_reason, `#${i}: a half-written stream: ${r.body.slice(-200)}`);
  } else {
    let j;
    try { j = JSON.parse(r.body); } catch { fail(`#${i}: a half-written body: ${r.body.slice(-200)}`); }
    check(j.choices[0].finish_reason, `#${i}: no finish_reason`);
  }
  ++complete;
}
check(complete >= 4, `only ${complete} answers completed`);
console.log(`SIGTERM: ${complete} complete answers, ${refused} refused after the signal; exit 0`);
