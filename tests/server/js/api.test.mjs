// bmoe-server through the openai npm package, as an application would use it:
// models.list, a greedy chat completion, the same request streamed (the
// deltas join to the same text, each token's chunk with its "bmoe" figures),
// a second turn whose usage shows the first turn's prompt served from the
// cache, and the refusals as the client's error classes with their statuses.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';

import { makeModel, rejection, scratch, startServer } from './server.mjs';

const MAX_TOKENS = 16;
let model, server, client;

// A client of the server at url; options override (apiKey, defaultHeaders).
function clientOf(url, options = {}) {
  return new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: 'unused',
    organization: null,
    project: null,
    maxRetries: 0, // a refusal must surface as it is, not be retried
    timeout: 30000,
    ...options,
  });
}

before(async () => {
  model = makeModel(scratch('server-js-api'));
  // a body limit of 1 MiB for the 413
  server = await startServer(['-m', model, '-t', '1', '--max-body', '1']);
  client = clientOf(server.url);
});

after(async () => {
  if (server) assert.equal(await server.stop('SIGTERM'), 0, `bmoe-server did not exit cleanly:\n${server.log()}`);
});

test('models.list names the one model', async () => {
  const models = [];
  for await (const entry of client.models.list()) models.push(entry);
  assert.deepEqual(models.map((m) => [m.id, m.object, m.owned_by]), [['tiny.gguf', 'model', 'bmoe']]);
});

const hello = { model: 'tiny.gguf', messages: [{ role: 'user', content: 'Hello' }], max_tokens: MAX_TOKENS, temperature: 0 };
let greedy; // the non-streamed answer's text

test('a chat completion, not streamed', async () => {
  const completion = await client.chat.completions.create(hello);
  assert.equal(completion.object, 'chat.completion');
  assert.equal(completion.model, 'tiny.gguf');
  assert.match(completion.id, /^chatcmpl-/);
  assert.equal(completion.choices.length, 1);
  const [choice] = completion.choices;
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(choice.message.content.length > 0, 'an empty answer');
  // the random tiny model never says its end of turn within 16 tokens
  assert.equal(choice.finish_reason, 'length');
  const { usage } = completion;
  assert.equal(usage.completion_tokens, MAX_TOKENS);
  assert.ok(usage.prompt_tokens > 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  assert.equal(completion.bmoe.n_prompt, usage.prompt_tokens);
  assert.equal(usage.prompt_tokens_details.cached_tokens, completion.bmoe.n_reused);
  greedy = choice.message.content;
});

test('the same chat streamed joins to the same text, every token with its figures', async () => {
  assert.ok(greedy, 'needs the non-streamed answer');
  const stream = await client.chat.completions.create({ ...hello, stream: true, stream_options: { include_usage: true } });
  let text = '', tokens = 0, role = null, finish = null, usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(finish, null, 'a chunk after the one with finish_reason');
    const [choice] = chunk.choices;
    role ??= choice.delta.role ?? null;
    text += choice.delta.content ?? '';
    finish = choice.finish_reason;
    if (chunk.usage) usage = chunk.usage;
    if (chunk.bmoe?.token !== undefined) {
      tokens++;
      assert.equal(chunk.bmoe.token, tokens, 'the tokens are numbered in order');
      for (const figure of ['wall_ms', 'io_ms', 'stall_ms', 'mgmt_ms', 'read_mib', 'cache_hits', 'cache_misses'])
        assert.equal(typeof chunk.bmoe[figure], 'number', `bmoe.${figure} of token ${tokens}`);
      assert.ok(chunk.bmoe.wall_ms > 0);
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(finish, 'length');
  assert.equal(text, greedy);
  assert.equal(tokens, MAX_TOKENS);
  assert.equal(usage?.completion_tokens, MAX_TOKENS);
});

test("the client's stream helper rebuilds the same completion", async () => {
  assert.ok(greedy, 'needs the non-streamed answer');
  const runner = client.chat.completions.stream({ ...hello, stream_options: { include_usage: true } });
  const completion = await runner.finalChatCompletion();
  assert.equal(completion.choices[0].message.content, greedy);
  assert.equal(completion.choices[0].finish_reason, 'length');
});

test("logprobs: one entry per token, and the client's stream helper rebuilds the same", async () => {
  const asked = { ...hello, logprobs: true, top_logprobs: 2 };
  const completion = await client.chat.completions.create(asked);
  const [choice] = completion.choices;
  assert.equal(choice.message.content, greedy, 'logprobs changed the answer');
  const entries = choice.logprobs.content;
  assert.equal(entries.length, completion.usage.completion_tokens);
  for (const entry of entries) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0);
    assert.ok(Array.isArray(entry.bytes));
    assert.equal(entry.top_logprobs.length, 2);
    // greedy: the token is the most likely
    assert.deepEqual(entry.top_logprobs[0].bytes, entry.bytes);
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
  }
  const rebuilt = await client.chat.completions.stream(asked).finalChatCompletion();
  assert.deepEqual(rebuilt.choices[0].logprobs.content, entries);
});

test('tools: a request with tools and a history holding a call and its answer', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const ask = { role: 'user', content: 'Weather in Paris?' };
  const first = await client.chat.completions.create({ ...hello, messages: [ask], tools });
  const called = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] };
  const answered = { role: 'tool', tool_call_id: 'c1', content: '18C' };
  const second = await client.chat.completions.create({ ...hello, messages: [ask, called, answered], tools });
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens + 10, 'the call and its answer did not reach the prompt');
  // this random model writes no call: the text comes back as content
  assert.equal(typeof second.choices[0].message.content, 'string');
  // a forced call: the answer is one call of the tool, whatever the model would write
  const forced = await client.chat.completions.create({ ...hello, max_tokens: 400, tools, tool_choice: 'required' });
  assert.equal(forced.choices[0].finish_reason, 'tool_calls');
  const [call] = forced.choices[0].message.tool_calls;
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.ok(typeof args === 'object' && Object.keys(args).every((key) => key === 'city'), call.function.arguments);
  const error = await rejection(client.chat.completions.create({ ...hello, tool_choice: 'required' }));
  assert.ok(error instanceof OpenAI.BadRequestError, `${error}`);
  assert.equal(error.param, 'tool_choice');
});

test('a second turn reuses the first turn as cached prompt tokens', async () => {
  const turn = [{ role: 'user', content: 'Hi there' }];
  const first = await client.chat.completions.create({ messages: turn, model: 'tiny.gguf', max_tokens: 8, temperature: 0 });
  const answer = first.choices[0].message.content;
  const second = await client.chat.completions.create({
    model: 'tiny.gguf',
    messages: [...turn, { role: 'assistant', content: answer }, { role: 'user', content: 'Why' }],
    max_tokens: 8,
    temperature: 0,
  });
  const cached = second.usage.prompt_tokens_details?.cached_tokens;
  // the whole first prompt is a prefix of the second and still in the context
  assert.ok(cached >= first.usage.prompt_tokens, `cached ${cached} < the first prompt's ${first.usage.prompt_tokens}`);
  assert.ok(cached < second.usage.prompt_tokens, `cached ${cached} of ${second.usage.prompt_tokens}`);
  assert.equal(second.bmoe.n_reused, cached);
});

test('an unknown model: 404 model_not_found naming the model served', async () => {
  const error = await rejection(client.chat.completions.create({ ...hello, model: 'gpt-4o', max_tokens: 2 }));
  assert.equal(error.status, 404);
  assert.equal(error.code, 'model_not_found');
  assert.match(error.message, /tiny\.gguf/);
});

test('the model named by its file name without .gguf', async () => {
  const completion = await client.chat.completions.create({ ...hello, model: 'tiny', max_tokens: 2 });
  assert.equal(completion.model, 'tiny.gguf');
  assert.equal(completion.usage.completion_tokens, 2);
});

test('a body that is not JSON: 400 invalid_json (raw fetch: the client always sends JSON)', async () => {
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: '{"messages":',
  });
  assert.equal(response.status, 400);
  const { error } = await response.json();
  assert.equal(error.type, 'invalid_request_error');
  assert.equal(error.code, 'invalid_json');
});

test('an unsupported field: BadRequestError naming it', async () => {
  const error = await rejection(client.chat.completions.create({ ...hello, n: 2 }));
  assert.ok(error instanceof OpenAI.BadRequestError, `${error}`);
  assert.equal(error.status, 400);
  assert.equal(error.param, 'n');
  assert.equal(error.type, 'invalid_request_error');
});

test('an oversize body: APIError 413', async () => {
  const error = await rejection(client.chat.completions.create({
    ...hello,
    messages: [{ role: 'user', content: 'a'.repeat(3 << 19) }], // 1.5 MiB over the 1 MiB limit
  }));
  assert.ok(error instanceof OpenAI.APIError, `${error}`);
  assert.equal(error.status, 413);
  assert.equal(error.code, 'request_too_large');
});

test('an unknown path: NotFoundError', async () => {
  const error = await rejection(client.get('/nowhere'));
  assert.ok(error instanceof OpenAI.NotFoundError, `${error}`);
  assert.equal(error.status, 404);
});

test("another site's Origin: PermissionDeniedError", async () => {
  const foreign = clientOf(server.url, { defaultHeaders: { Origin: 'http://evil.example' } });
  const error = await rejection(foreign.models.list());
  assert.ok(error instanceof OpenAI.PermissionDeniedError, `${error}`);
  assert.equal(error.status, 403);
  assert.equal(error.code, 'forbidden_origin');
});

test('a server with --api-key: AuthenticationError without the key or with a wrong one', async () => {
  const keyed = await startServer(['-m', model, '-t', '1', '--api-key', 'sesame']);
  try {
    const without = await rejection(clientOf(keyed.url, { defaultHeaders: { Authorization: null } }).models.list());
    assert.ok(without instanceof OpenAI.AuthenticationError, `${without}`);
    assert.equal(without.status, 401);
    assert.equal(without.code, 'invalid_api_key');
    const wrong = await rejection(clientOf(keyed.url, { apiKey: 'open' }).models.list());
    assert.ok(wrong instanceof OpenAI.AuthenticationError, `${wrong}`);
    const models = await clientOf(keyed.url, { apiKey: 'sesame' }).models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['tiny.gguf']);
  } finally {
    assert.equal(await keyed.stop('SIGINT'), 0, `the keyed server did not exit cleanly:\n${keyed.log()}`);
  }
});
