// Load with faults: REQUESTS requests from CLIENTS concurrent clients, streamed and not, with
// clients that disconnect mid-stream and clients that send malformed JSON, wrong types or
// oversize bodies. Every well-formed request that was not abandoned gets exactly one complete
// answer equal to the expected greedy output (`g4c run`, or in the sanitizer build the server's
// own answer to the request alone); the server stays up; afterwards /metrics shows no running
// or waiting sequence and no used KV block.
//   node load_faults.mjs [REQUESTS] [CLIENTS]
import { startServer, waitExit, runExpected, serialExpected, request, parseSse, metrics, check, fail, PROMPTS } from './lib.mjs';

const REQUESTS = Number(process.argv[2] || 320);
const CLIENTS = Number(process.argv[3] || 32);
const N = 8;
const srv = await startServer(['--max-body-bytes', '65536', '--max-waiting', '4096', '--batch-size', '8']);
const expected = process.env.G4C_SERVE_BIN ? await serialExpected(srv.port, PROMPTS, N) : runExpected(PROMPTS, N);

// Request kinds by index: 60 % well-formed (half streamed), 20 % disconnect, 20 % bad bodies.
function kind(i) {
  const k = i % 10;
  if (k < 3) return 'plain';
  if (k < 6) return 'stream';
  if (k < 8) return 'disconnect';
  return ['malformed', 'wrongtype', 'oversize', 'badfield'][Math.floor(i / 10) % 4];
}
const counts = {};
let next = 0, done = 0;
const errors = [];
async function one(i) {
  const kd = kind(i), p = i % PROMPTS.length, want = expected[p];
  counts[kd] = (counts[kd] || 0) + 1;
  const body = { prompt: PROMPTS[p], max_tokens: N, temperature: 0 };
  if (kd === 'plain') {
    const r = await request(srv.port, 'POST', '/v1/completions', { ...body, return_token_ids: true });
    if (r.status !== 200 || !r.complete) return errors.push(`#${i} plain: ${r.status} ${r.error || ''} ${r.body.slice(0, 200)}`);
    const j = JSON.parse(r.body);
    if (JSON.stringify(j.choices[0].token_ids) !== JSON.stringify(want.token_ids) || j.choices[0].text !== want.text)
      errors.push(`#${i} plain: ${JSON.stringify(j.choices[0])} != ${JSON.stringify(want)}`);
  } else if (kd === 'stream') {
    const r = await request(srv.port, 'POST', '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } });
    const s = parseSse(r.body);
    if (r.status !== 200 || !r.complete || !s.done || !s.wellFormed) return errors.push(`#${i} stream: ${r.status} incomplete ${r.body.slice(-200)}`);
    if (s.text !== want.text || s.usage.completion_tokens !== want.token_ids.length)
      errors.push(`#${i} stream: ${JSON.stringify(s.text)} != ${JSON.stringify(want.text)}`);
    const n = r.body.split('data: [DONE]').length - 1;
    if (n !== 1) errors.push(`#${i} stream: ${n} [DONE]`);
  } else if (kd === 'disconnect') {
    // Long answers, abandoned after the first chunk: the server must cancel them.
    await request(srv.port, 'POST', '/v1/completions', { ...body, max_tokens: 200, ignore_eos: true, stream: true },
      { onData: (c, req) => req.destroy() });
  } else {
    let raw;
    if (kd === 'malformed') raw = '{"prompt": "abc", "max_tokens": ';
    else if (kd === 'wrongtype') raw = JSON.stringify({ prompt: 42, max_tokens: 'many' });
    else if (kd === 'oversize') raw = JSON.stringify({ prompt: 'x'.repeat(100000), max_tokens: 1 });
    else raw = JSON.stringify({ prompt: 'abc', best_of: 3 });
    const r = await request(srv.port, 'POST', '/v1/completions', undefined, { rawBody: raw });
    const wantStatus = kd === 'oversize' ? 413 : 400;
    let j = null;
    try { j = JSON.parse(r.body); } catch {}
    if (r.status !== wantStatus || !j || !j.error || typeof j.error.message !== 'string')
      errors.push(`#${i} ${kd}: ${r.status} ${r.body.slice(0, 200)}`);
  }
}
async function client() {
  for (let i; (i = next++) < REQUESTS;) { await one(i); ++done; }
}
const t0 = Date.now();
await Promise.all(Array.from({ length: CLIENTS }, client));
const secs = (Date.now() - t0) / 1000;
console.log(`${REQUESTS} requests from ${CLIENTS} clients in ${secs.toFixed(1)} s: ${JSON.stringify(counts)}`);
check(srv.proc.exitCode === null && srv.proc.signalCode === null, 'the server died under load:\n' + srv.stderr());
check((await request(srv.port, 'GET', '/health')).status === 200, '/health after the load');
if (errors.length) fail(errors.length + ' bad answers:\n' + errors.slice(0, 10).join('\n'));

// The engine drains: nothing running or waiting, no KV block in use (cancellations included).
let m;
for (let t = 0; t < 100; ++t) {
  m = await metrics(srv.port);
  if (m['g4c_num_requests_running'] === 0 && m['g4c_num_requests_waiting'] === 0 && m['g4c_kv_blocks_used'] === 0) break;
  await new Promise((r) => setTimeout(r, 100));
}
check(m['g4c_num_requests_running'] === 0 && m['g4c_num_requests_waiting'] === 0 && m['g4c_kv_blocks_used'] === 0,
  'after the load: ' + JSON.stringify(m));
check(m['g4c_kv_blocks_free'] > 0, 'no KV blocks reported');
check((m['g4c_generations_total{finish_reason="cancelled"}'] || 0) > 0, 'no disconnect was seen as a cancellation: ' + JSON.stringify(m));
// (Without g4c run beside it, the expected answers came from the server: one request a prompt.)
const served = counts.plain + counts.stream + (process.env.G4C_SERVE_BIN ? PROMPTS.length : 0);
check(m['g4c_requests_total{endpoint="completions",outcome="ok"}'] === served, 'ok count ' + JSON.stringify(m));
srv.proc.kill('SIGTERM');
const { code } = await waitExit(srv.proc);
check(code === 0, 'server exit status ' + code);
console.log('load and fault test passed');
