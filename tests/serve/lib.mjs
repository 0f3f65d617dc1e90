// Helpers of the g4c serve tests: start a server process on a free loopback port, raw HTTP
// requests (node:http) with SSE parsing, the expected greedy outputs from `g4c run`.
import { spawn, execFileSync } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const SRC = process.env.G4C_SOURCE_DIR;
export const BIN = process.env.G4C_BINARY_DIR;
export const MODEL = path.join(SRC, 'models/gemma4-tiny');
// The server binary: `g4c serve` of the main build, or the sanitizer build's g4c_serve_test_server.
export const SERVER = process.env.G4C_SERVE_BIN || path.join(BIN, 'bin/g4c');
export const SERVER_ARGS = process.env.G4C_SERVE_BIN ? [] : ['serve'];

// Every process the tests spawn through startServer: killed when the test exits, whatever the way
// (a failed check exits at once), so no server outlives its test.
const children = new Set();
process.on('exit', () => { for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); });
export function track(proc) {
  children.add(proc);
  return proc;
}

export function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}
export function check(cond, msg) {
  if (!cond) fail(msg);
}
export function tmpdir(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), name));
}

// Starts a server; resolves with {proc, port, url, stderr()} once it listens.
export function startServer(extra = [], { timeoutMs = 120000 } = {}) {
  const args = [...SERVER_ARGS, '--model', MODEL, '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...extra];
  const proc = track(spawn(SERVER, args, { stdio: ['ignore', 'inherit', 'pipe'] }));
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error('server did not start:\n' + err)); }, timeoutMs);
    proc.stderr.on('data', (d) => {
      err += d.toString();
      const m = err.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && !proc._g4cStarted) {
        proc._g4cStarted = true;
        clearTimeout(timer);
        const port = Number(m[1]);
        resolve({ proc, port, url: `http://127.0.0.1:${port}`, stderr: () => err });
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); if (!proc._g4cStarted) reject(new Error(`server exited ${code}:\n${err}`)); });
  });
}

export function waitExit(proc, timeoutMs = 60000) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve({ code: proc.exitCode, signal: proc.signalCode });
    const t = setTimeout(() => { proc.kill('SIGKILL'); resolve({ code: null, signal: 'timeout' }); }, timeoutMs);
    proc.on('exit', (code, signal) => { clearTimeout(t); resolve({ code, signal }); });
  });
}

// One HTTP request. Resolves {status, headers, body, complete}; complete = the response ended
// normally. onData(chunk, req) may abort the request (req.destroy()).
export function request(port, method, urlPath, body, { onData, timeoutMs = 120000, rawBody } = {}) {
  return new Promise((resolve) => {
    const data = rawBody !== undefined ? rawBody : body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent: false,
      headers: data !== undefined ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {} });
    const timer = setTimeout(() => { req.destroy(new Error('timeout')); }, timeoutMs);
    req.on('response', (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { buf += c; if (onData) onData(c, req); });
      res.on('end', () => { clearTimeout(timer); resolve({ status: res.statusCode, headers: res.headers, body: buf, complete: true }); });
      res.on('aborted', () => { clearTimeout(timer); resolve({ status: res.statusCode, headers: res.headers, body: buf, complete: false }); });
      res.on('error', () => { clearTimeout(timer); resolve({ status: res.statusCode, headers: res.headers, body: buf, complete: false }); });
    });
    req.on('error', (e) => { clearTimeout(timer); resolve({ status: 0, error: String(e), body: '', complete: false }); });
    if (data !== undefined) req.write(data);
    req.end();
  });
}

// Parses an SSE body: {events: [json...], done: saw [DONE], text, finish_reason, usage}.
export function parseSse(body) {
  const out = { events: [], done: false, text: '', finish_reason: null, usage: null, wellFormed: true };
  for (const block of body.split('\n\n')) {
    if (!block) continue;
    if (!block.startsWith('data: ')) { out.wellFormed = false; continue; }
    const d = block.slice(6);
    if (d === '[DONE]') { out.done = true; continue; }
    let j;
    try { j = JSON.parse(d); } catch { out.wellFormed = false; continue; }
    out.events.push(j);
    if (j.usage) out.usage = j.usage;
    for (const c of j.choices || []) {
      out.text += c.text ?? c.delta?.content ?? '';
      if (c.finish_reason) out.finish_reason = c.finish_reason;
    }
  }
  return out;
}

// Expected greedy outputs: `g4c run` of the same prompts (strings, or token id arrays), max_new_tokens each.
export function runExpected(prompts, maxNewTokens, extra = []) {
  const dir = tmpdir('g4c-serve-run-');
  const input = path.join(dir, 'in.jsonl'), output = path.join(dir, 'out.jsonl');
  fs.writeFileSync(input, prompts.map((p) => JSON.stringify(Array.isArray(p) ? { input_ids: p, max_new_tokens: maxNewTokens }
  : { prompt: p, max_new_tokens: maxNewTokens })).join('\n') + '\n');
  execFileSync(path.join(BIN, 'bin/g4c'), ['run', '--model', MODEL, '--input', input, '--output', output, '--threads', '2', ...extra],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  return fs.readFileSync(output, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
}

// Expected greedy outputs from the server itself, one request at a time (nothing else running).
export async function serialExpected(port, prompts, maxNewTokens) {
  const out = [];
  for (const p of prompts) {
    const r = await request(port, 'POST', '/v1/completions', { prompt: p, max_tokens: maxNewTokens, temperature: 0, return_token_ids: true });
    check(r.status === 200, `serial request: ${r.status} ${r.body}`);
    const j = JSON.parse(r.body);
    out.push({ text: j.choices[0].text, token_ids: j.choices[0].token_ids, prompt_tokens: j.usage.prompt_tokens });
  }
  return out;
}

export async function metrics(port) {
  const r = await request(port, 'GET', '/metrics');
  const m = {};
  for (const line of r.body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return m;
}

export const PROMPTS = [
  'The capital of France is',
  'Once upon a time, in a small village,',
  'def fibonacci(n):',
  'The quick brown fox',
  'In 1905, Albert Einstein published',
  'Water boils at',
  'Les enfants jouent dans le jardin et',
  '日本の首都は',
];
