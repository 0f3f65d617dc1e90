// The official `openai` npm client against `g4c serve` on the tiny model: completions and chat,
// streamed and not; greedy output == `g4c run` token for token; stop strings; seeds; usage;
// the 400s that name their field.
import OpenAI from 'openai';
import { startServer, waitExit, runExpected, request, check, fail, PROMPTS } from './lib.mjs';

const N = 12;  // generated tokens per request
const IDS = [2, 818, 5279, 529, 7001, 563];  // a prompt given as token ids
const prompts = PROMPTS.slice(0, 4);
const expected = runExpected([...prompts, IDS], N);
const srv = await startServer(['--served-model-name', 'tiny']);
const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
try {
  // Models and health.
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'tiny', 'models: ' + JSON.stringify(models.data));
  check((await request(srv.port, 'GET', '/health')).status === 200, '/health is not 200');

  // Greedy completions == g4c run (token ids and text), non-streamed and streamed.
  for (let i = 0; i < prompts.length; ++i) {
    const r = await client.completions.create({ model: 'tiny', prompt: prompts[i], max_tokens: N, temperature: 0, return_token_ids: true });
    const want = expected[i];
    check(JSON.stringify(r.choices[0].token_ids) === JSON.stringify(want.token_ids),
      `prompt ${i}: server tokens ${JSON.stringify(r.choices[0].token_ids)} != g4c run ${JSON.stringify(want.token_ids)}`);
    check(r.choices[0].text === want.text, `prompt ${i}: text ${JSON.stringify(r.choices[0].text)} != ${JSON.stringify(want.text)}`);
    check(r.usage.prompt_tokens === want.prompt_tokens, `prompt ${i}: usage.prompt_tokens ${r.usage.prompt_tokens} != ${want.prompt_tokens}`);
    check(r.usage.completion_tokens === want.token_ids.length, `prompt ${i}: usage.completion_tokens`);
    check(r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'usage.total_tokens');
    check(r.choices[0].finish_reason === want.finish_reason, `prompt ${i}: finish_reason ${r.choices[0].finish_reason} != ${want.finish_reason}`);
    check(r.object === 'text_completion' && r.model === 'tiny', 'completion object/model');

    const stream = await client.completions.create({ model: 'tiny', prompt: prompts[i], max_tokens: N, temperature: 0, stream: true,
      stream_options: { include_usage: true } });
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const c of stream) {
      ++chunks;
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) { text += ch.text; if (ch.finish_reason) finish = ch.finish_reason; }
    }
    check(text === want.text, `prompt ${i} streamed: ${JSON.stringify(text)} != ${JSON.stringify(want.text)}`);
    check(finish === want.finish_reason, `prompt ${i} streamed finish_reason ${finish}`);
    check(usage && usage.completion_tokens === want.token_ids.length && usage.prompt_tokens === want.prompt_tokens,
      `prompt ${i} streamed usage ${JSON.stringify(usage)}`);
    check(chunks >= 2, 'a stream of one chunk');
  }

  // Prompt as token ids == g4c run of the same input_ids.
  {
    const r = await client.completions.create({ prompt: IDS, max_tokens: N, temperature: 0, return_token_ids: true });
    const want = expected[prompts.length];
    check(JSON.stringify(r.choices[0].token_ids) === JSON.stringify(want.token_ids) && r.choices[0].text === want.text,
      `token-id prompt: ${JSON.stringify(r.choices[0])} != ${JSON.stringify(want)}`);
    check(r.usage.prompt_tokens === IDS.length, 'token-id prompt usage');
    const z = await client.completions.create({ prompt: prompts[0], max_tokens: 0 });
    check(z.choices[0].text === '' && z.choices[0].finish_reason === 'length' && z.usage.completion_tokens === 0, 'max_tokens 0');
  }

  // Stop strings: the text ends before the first occurrence, which is not returned.
  {
    const want = expected[1].text;
    const cut = Math.floor(want.length / 2);
    const stop = want.slice(cut, cut + 3);
    check(stop.length > 0 && want.length > 6, 'g4c run gave too short a text for the stop test: ' + JSON.stringify(want));
    const first = want.indexOf(stop);
    for (const stream of [false, true]) {
      let text = '', finish = null;
      if (stream) {
        for await (const c of await client.completions.create({ prompt: prompts[1], max_tokens: N, temperature: 0, stop: [stop, 'zzzz-never'], stream: true }))
          for (const ch of c.choices) { text += ch.text; if (ch.finish_reason) finish = ch.finish_reason; }
      } else {
        const r = await client.completions.create({ prompt: prompts[1], max_tokens: N, temperature: 0, stop: stop });
        text = r.choices[0].text; finish = r.choices[0].finish_reason;
      }
      check(text === want.slice(0, first), `stop ${JSON.stringify(stop)} (stream ${stream}): ${JSON.stringify(text)} != ${JSON.stringify(want.slice(0, first))}`);
      check(finish === 'stop', `stop finish_reason ${finish}`);
    }
  }

  // Seeds: the same seed gives the same sampled text (also with another request running beside it).
  {
    const body = { prompt: prompts[2], max_tokens: N, temperature: 1.0, top_p: 0.9, top_k: 50, seed: 1234 };
    const [a, b] = await Promise.all([client.completions.create(body), client.completions.create(body)]);
    const c = await client.completions.create(body);
    check(a.choices[0].text === b.choices[0].text && b.choices[0].text === c.choices[0].text,
      `seed 1234 gave ${JSON.stringify([a.choices[0].text, b.choices[0].text, c.choices[0].text])}`);
  }

  // Errors: 400 with the OpenAI shape, naming the field.
  const bad = [
    [{ prompt: 'x', n: 2 }, 'n'],
    [{ prompt: 'x', model: 'gpt-4' }, 'model'],
    [{ prompt: 'x', logit_bias: { 5: 1 } }, 'logit_bias'],
    [{ prompt: 'x', frobnicate: true }, 'frobnicate'],
    [{ prompt: 'x', max_tokens: 'ten' }, 'max_tokens'],
    [{ prompt: 'x', temperature: -1 }, 'temperature'],
    [{ prompt: 'x', max_tokens: 100000 }, 'max_tokens'],
    [{ prompt: 'x', stop: [1] }, 'stop'],
    [{ prompt: [1, 2, 99999999] }, 'prompt'],
  ];
  for (const [body, param] of bad) {
    try {
      await client.completions.create(body);
      fail('no error for ' + JSON.stringify(body));
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${e}`);
      check(e.error && e.error.param === param && typeof e.error.message === 'string' && e.error.type,
        `${JSON.stringify(body)}: error ${JSON.stringify(e.error)} does not name ${param}`);
    }
  }
  const malformed = await request(srv.port, 'POST', '/v1/completions', undefined, { rawBody: '{"prompt": "x",' });
  check(malformed.status === 400 && JSON.parse(malformed.body).error.message, 'malformed JSON: ' + malformed.body);

  // Chat: rendered by the model's template; answers equal `g4c run` of the rendered prompt.
  const probe = await request(srv.port, 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  if (probe.status === 400 && /no chat template engine/.test(probe.body)) {
    console.log('chat: SKIPPED (this build has no chat template engine)');
  } else {
    check(probe.status === 200, 'chat probe: ' + probe.status + ' ' + probe.body);
    const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a colour.' }];
    const r = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: N, temperature: 0 });
    check(r.object === 'chat.completion' && r.choices[0].message.role === 'assistant', 'chat object');
    let text = '', finish = null, usage = null;
    for await (const c of await client.chat.completions.create({ messages, max_tokens: N, temperature: 0, stream: true, stream_options: { include_usage: true } })) {
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) { text += ch.delta.content ?? ''; if (ch.finish_reason) finish = ch.finish_reason; }
    }
    check(text === r.choices[0].message.content, `chat streamed ${JSON.stringify(text)} != ${JSON.stringify(r.choices[0].message.content)}`);
    check(finish === r.choices[0].finish_reason && usage && usage.completion_tokens === r.usage.completion_tokens, 'chat stream finish/usage');
    try {
      await client.chat.completions.create({ messages: [{ role: 'wizard', content: 'x' }] });
      fail('bad role accepted');
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError && e.error.param === 'messages[0].role', 'bad role: ' + JSON.stringify(e.error));
    }
  }
  console.log('openai client tests passed');
} finally {
  srv.proc.kill('SIGTERM');
  const { code } = await waitExit(srv.proc);
  if (code !== 0) fail('server exit status ' + code + '\n' + srv.stderr());
}
