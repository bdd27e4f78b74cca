// bmoe-server through the @anthropic-ai/sdk package, as an application written
// for Anthropic's Messages API would use it: messages.create (the whole message,
// its blocks, stop reason and usage), the SDK's stream helper (its text events
// join to the same text, its final message is the same), a forced tool call
// (tool_choice any) and the tool's result sent back, countTokens against the
// usage, and refusals as the SDK's error classes with Anthropic's error body.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';

import { makeModel, rejection, scratch, startServer } from './server.mjs';

const MAX_TOKENS = 16;
let server, client;

before(async () => {
  const model = makeModel(scratch('server-js-anthropic'));
  server = await startServer(['-m', model, '-t', '1', '--api-key', 'sesame']);
  // the key goes as x-api-key, Anthropic's header; no retries: a refusal is the answer
  client = new Anthropic({ baseURL: server.url, apiKey: 'sesame', maxRetries: 0 });
});

after(async () => {
  if (server) assert.equal(await server.stop('SIGTERM'), 0, `bmoe-server did not exit cleanly:\n${server.log()}`);
});

const hello = {
  model: 'tiny.gguf',
  max_tokens: MAX_TOKENS,
  temperature: 0,
  messages: [{ role: 'user', content: 'Hello' }],
};
let greedy;

test('messages.create: a message of one text block', async () => {
  const message = await client.messages.create(hello);
  assert.match(message.id, /^msg_/);
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.model, 'tiny.gguf');
  assert.deepEqual(message.content.map((block) => block.type), ['text']);
  assert.ok(message.content[0].text.length > 0, 'an empty answer');
  // the random tiny model never says its end of turn within 16 tokens
  assert.equal(message.stop_reason, 'max_tokens');
  assert.equal(message.stop_sequence, null);
  assert.equal(message.usage.output_tokens, MAX_TOKENS);
  assert.ok(message.usage.input_tokens + message.usage.cache_read_input_tokens > 0);
  greedy = message;
});

test('the stream helper: its text events join to the same text, its final message is the same', async () => {
  assert.ok(greedy, 'needs the non-streamed answer');
  const stream = client.messages.stream(hello);
  let text = '', events = 0;
  stream.on('text', (delta) => { text += delta; events++; });
  const final = await stream.finalMessage();
  assert.ok(events > 1);
  assert.equal(text, greedy.content[0].text);
  assert.deepEqual(final.content, greedy.content);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(final.usage.output_tokens, MAX_TOKENS);
});

const weather = {
  name: 'get_weather',
  description: 'the weather in a city',
  input_schema: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'] },
};
const ask = { role: 'user', content: 'Weather in Paris?' };

test('tool_choice any: one tool_use block meeting its schema, and its result sent back', async () => {
  const request = {
    model: 'tiny.gguf', max_tokens: 400, messages: [ask], tools: [weather], tool_choice: { type: 'any' },
  };
  const message = await client.messages.create(request);
  assert.equal(message.stop_reason, 'tool_use');
  assert.equal(message.content.length, 1);
  const [call] = message.content;
  assert.equal(call.type, 'tool_use');
  assert.match(call.id, /^toolu_/);
  assert.equal(call.name, 'get_weather');
  assert.ok(['Paris', 'Rome'].includes(call.input.city), JSON.stringify(call.input));
  const streamed = await client.messages.stream(request).finalMessage();
  assert.deepEqual(streamed.content.map((block) => [block.type, block.name, block.input]),
    [['tool_use', 'get_weather', call.input]]);
  const followed = await client.messages.create({
    model: 'tiny.gguf',
    max_tokens: 4,
    tools: [weather],
    messages: [ask, { role: 'assistant', content: message.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '18C' }] }],
  });
  assert.equal(followed.usage.output_tokens, 4);
  assert.ok(followed.usage.input_tokens + followed.usage.cache_read_input_tokens >
    message.usage.input_tokens + message.usage.cache_read_input_tokens);
});

test('countTokens: the prompt the usage counts', async () => {
  const { input_tokens: counted } = await client.messages.countTokens({
    model: 'tiny.gguf', system: 'Be brief.', messages: hello.messages,
  });
  const message = await client.messages.create({ ...hello, system: 'Be brief.', max_tokens: 2 });
  assert.equal(counted, message.usage.input_tokens + message.usage.cache_read_input_tokens);
});

test('a refusal: the SDK\'s error class with Anthropic\'s error body', async () => {
  const bad = await rejection(client.messages.create({ ...hello, top_k: -1 }));
  assert.ok(bad instanceof Anthropic.BadRequestError, String(bad));
  assert.equal(bad.status, 400);
  assert.equal(bad.error.type, 'error');
  assert.equal(bad.error.error.type, 'invalid_request_error');
  assert.match(bad.error.error.message, /top_k/);
  const image = await rejection(client.messages.create({
    ...hello,
    messages: [{
      role: 'user',
      content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'aGk=' } }],
    }],
  }));
  assert.equal(image.status, 400);
  assert.match(image.error.error.message, /image/);
  const missing = await rejection(client.messages.create({ ...hello, model: 'claude-sonnet-4-5' }));
  assert.ok(missing instanceof Anthropic.NotFoundError, String(missing));
  assert.equal(missing.error.error.type, 'not_found_error');
  const keyless = new Anthropic({ baseURL: server.url, apiKey: 'wrong', maxRetries: 0 });
  const refused = await rejection(keyless.messages.create(hello));
  assert.ok(refused instanceof Anthropic.AuthenticationError, String(refused));
});
