// bmoe-server through the ollama npm package, as an application written for
// Ollama would use it: list, show, ps and version, a greedy chat (streamed
// and not: the pieces join to the same text, the last one carries done and
// the counts), generate raw and templated, structured output by format, and
// a refusal as the client's ResponseError with its status.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Ollama } from 'ollama';

import { makeModel, rejection, scratch, startServer } from './server.mjs';

const NUM_PREDICT = 16;
let server, client;

before(async () => {
  const model = makeModel(scratch('server-js-ollama'));
  server = await startServer(['-m', model, '-t', '1']);
  client = new Ollama({ host: server.url });
});

after(async () => {
  if (server) assert.equal(await server.stop('SIGTERM'), 0, `bmoe-server did not exit cleanly:\n${server.log()}`);
});

function assertFinal(last, reason) {
  assert.equal(last.done, true);
  assert.equal(last.done_reason, reason);
  assert.equal(last.eval_count, NUM_PREDICT);
  assert.ok(last.prompt_eval_count > 0);
  for (const duration of ['total_duration', 'prompt_eval_duration', 'eval_duration'])
    assert.ok(Number.isInteger(last[duration]) && last[duration] > 0, `${duration}: ${last[duration]}`);
}

test('list, ps, show and version describe the one model', async () => {
  const { models } = await client.list();
  assert.deepEqual(models.map((m) => [m.name, m.details.format, m.details.family]), [['tiny.gguf', 'gguf', 'qwen3moe']]);
  assert.ok(models[0].size > 0);
  const running = await client.ps();
  assert.equal(running.models.length, 1);
  assert.ok(running.models[0].context_length > 0);
  const shown = await client.show({ model: 'tiny.gguf' });
  assert.equal(shown.details.format, 'gguf');
  assert.ok(shown.capabilities.includes('completion') && shown.capabilities.includes('tools'));
  assert.match(shown.template, /im_start/);
  const { version } = await client.version();
  assert.equal(typeof version, 'string');
});

const hello = {
  model: 'tiny.gguf',
  messages: [{ role: 'user', content: 'Hello' }],
  options: { num_predict: NUM_PREDICT, temperature: 0 },
};
let greedy;

test('a chat, not streamed', async () => {
  const response = await client.chat({ ...hello, stream: false });
  assert.equal(response.model, 'tiny.gguf');
  assert.equal(response.message.role, 'assistant');
  assert.ok(response.message.content.length > 0, 'an empty answer');
  // the random tiny model never says its end of turn within 16 tokens
  assertFinal(response, 'length');
  greedy = response.message.content;
});

test('the same chat streamed joins to the same text', async () => {
  assert.ok(greedy, 'needs the non-streamed answer');
  const stream = await client.chat({ ...hello, stream: true });
  let text = '', last = null, pieces = 0;
  for await (const piece of stream) {
    assert.equal(last, null, 'a piece after the last');
    text += piece.message.content;
    pieces++;
    if (piece.done) last = piece;
  }
  assert.ok(pieces > 1);
  assertFinal(last, 'length');
  assert.equal(text, greedy);
});

test('generate: raw as the prompt is, templated as a chat of one user message', async () => {
  const raw = await client.generate({ model: 'tiny', prompt: 'Once upon', raw: true, options: hello.options });
  assertFinal(raw, 'length');
  let streamedRaw = '';
  const pieces = await client.generate({ model: 'tiny', prompt: 'Once upon', raw: true, stream: true, options: hello.options });
  for await (const piece of pieces) streamedRaw += piece.response;
  assert.equal(streamedRaw, raw.response);
  const templated = await client.generate({ model: 'tiny', prompt: 'Hello', options: hello.options });
  assert.equal(templated.response, greedy);
});

test('format: a JSON schema holds the answer to it', async () => {
  const format = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
  const response = await client.chat({ ...hello, format, options: { num_predict: 64 } });
  const value = JSON.parse(response.message.content);
  assert.equal(typeof value.ok, 'boolean');
});

test('an option bmoe does not do: ResponseError 400 naming it', async () => {
  const error = await rejection(client.chat({ ...hello, options: { mirostat: 2 } }));
  assert.equal(error.name, 'ResponseError');
  assert.equal(error.status_code, 400);
  assert.match(error.error, /options\.mirostat/);
  const missing = await rejection(client.chat({ ...hello, model: 'llama3' }));
  assert.equal(missing.status_code, 404);
});
