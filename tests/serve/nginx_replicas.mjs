// Two `g4c serve` replicas behind a real nginx (least_conn, passive health checks with
// max_fails / proxy_next_upstream) on 127.0.0.1, as docs/SERVING.md describes: both replicas
// serve; after one is killed, every request still gets its complete, correct answer (nginx
// retries the refused connection on the other replica).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { track, startServer, waitExit, runExpected, serialExpected, request, metrics, check, fail, tmpdir, PROMPTS } from './lib.mjs';

const NGINX = process.env.NGINX || '/usr/sbin/nginx';
if (!fs.existsSync(NGINX)) { console.log('nginx not installed: SKIPPED'); process.exit(77); }
const N = 6;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

const a = await startServer(), b = await startServer();
const expected = process.env.G4C_SERVE_BIN ? await serialExpected(a.port, PROMPTS, N) : runExpected(PROMPTS, N);
const prefix = tmpdir('g4c-nginx-');
const port = await freePort();
const conf = fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), 'nginx.conf.in'), 'utf8')
  .replaceAll('@PREFIX@', prefix).replaceAll('@PORT@', String(port))
  .replace('@UPSTREAMS@', [a, b].map((s) => `    server 127.0.0.1:${s.port} max_fails=1 fail_timeout=5s;`).join('\n'));
fs.writeFileSync(path.join(prefix, 'nginx.conf'), conf);
const ngx = track(spawn(NGINX, ['-p', prefix, '-c', path.join(prefix, 'nginx.conf'), '-e', path.join(prefix, 'error.log')], { stdio: 'inherit' }));
let ok = false;
try {
  for (let t = 0; t < 100 && !ok; ++t) {
    ok = (await request(port, 'GET', '/health')).status === 200;
    if (!ok) await new Promise((r) => setTimeout(r, 100));
  }
  check(ok, 'nginx did not come up');

  async function batch(n, tag) {
    const rs = await Promise.all(Array.from({ length: n }, (_, i) =>
      request(port, 'POST', '/v1/completions', { prompt: PROMPTS[i % PROMPTS.length], max_tokens: N, temperature: 0 })));
    rs.forEach((r, i) => {
      check(r.status === 200 && r.complete, `${tag} #${i}: ${r.status} ${r.body.slice(0, 200)}`);
      check(JSON.parse(r.body).choices[0].text === expected[i % PROMPTS.length].text, `${tag} #${i}: wrong text`);
    });
  }
  await batch(16, 'both up');
  const served = async (s) => (await metrics(s.port))['g4c_requests_total{endpoint="completions",outcome="ok"}'] || 0;
  const [na, nb] = [await served(a), await served(b)];
  check(na > 0 && nb > 0 && na + nb === 16, `least_conn did not use both replicas: ${na} + ${nb}`);

  a.proc.kill('SIGKILL');  // a replica dies without warning
  await waitExit(a.proc);
  await batch(16, 'one killed');
  const nb2 = await served(b);
  check(nb2 === nb + 16, `after the kill replica b served ${nb2 - nb} of 16`);
  console.log(`nginx replicas: ${na} + ${nb} requests with both up; 16 of 16 after one was killed`);
} finally {
  ngx.kill('SIGQUIT');
  await waitExit(ngx);
  for (const s of [a, b]) if (s.proc.exitCode === null && s.proc.signalCode === null) { s.proc.kill('SIGTERM'); await waitExit(s.proc); }
}
