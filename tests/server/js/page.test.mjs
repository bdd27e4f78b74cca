// bmoe-server's page (GET /, src/server/server_page.c) in Debian's headless
// Chromium, driven through playwright-core: the model line from /api/info, a
// prompt typed and sent, the answer streamed into the log equal to what the
// API answers the same request, one telemetry bar per token with its three
// parts, the run's figures line, the stop button posting /api/cancel, and no
// request leaving 127.0.0.1. A screenshot is left under the build folder.
import assert from 'node:assert/strict';
import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';

import { makeModel, required, scratch, startServer } from './server.mjs';

const N_PREDICT = 16; // the server's default: the page sends no max_tokens
let server, browser;

// The streamed answer to a chat body through fetch: the joined content and
// reasoning, and how many chunks carried a token's figures.
async function streamed(url, body) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(response.status, 200);
  let content = '', reasoning = '', tokens = 0;
  for (const event of (await response.text()).split('\n\n')) {
    if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
    const chunk = JSON.parse(event.slice(6));
    content += chunk.choices[0].delta.content ?? '';
    reasoning += chunk.choices[0].delta.reasoning_content ?? '';
    if (chunk.bmoe?.token !== undefined) tokens++;
  }
  return { content, reasoning, tokens };
}

before(async () => {
  const model = makeModel(scratch('server-js-page'));
  server = await startServer(['-m', model, '-t', '1', '-n', String(N_PREDICT)]);
  browser = await chromium.launch({ executablePath: process.env.BMOE_CHROMIUM || '/usr/bin/chromium' });
});

after(async () => {
  await browser?.close();
  if (server) assert.equal(await server.stop('SIGTERM'), 0, `bmoe-server did not exit cleanly:\n${server.log()}`);
});

test('the page chats with the model and draws each token', async () => {
  const expected = await streamed(server.url, { messages: [{ role: 'user', content: 'Hello' }] });
  assert.equal(expected.tokens, N_PREDICT);

  const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
  const page = await context.newPage();
  const local = `${server.url}/`;
  const requested = [], outside = [], errors = [];
  // every request is seen here; one to anywhere else is recorded and never sent
  await context.route('**/*', (route) => {
    const url = route.request().url();
    requested.push(url);
    if (url.startsWith(local)) return route.continue();
    outside.push(url);
    return route.abort();
  });
  page.on('pageerror', (error) => errors.push(error.message));

  await page.goto(local);
  assert.equal(await page.title(), 'bmoe');
  // the model line, from /api/info
  await page.waitForFunction(() => document.getElementById('info').textContent !== '');
  assert.match(await page.textContent('#info'), /^tiny\.gguf \(qwen3moe\), streaming off$/);

  const stop = page.locator('#stop');
  assert.ok(await stop.isVisible() && await stop.isEnabled(), 'no usable stop button');
  assert.equal(await stop.textContent(), 'stop');

  await page.fill('#prompt', 'Hello');
  await page.click('#send');
  // the answer streams in; the figures line comes with the last chunk
  await page.waitForFunction((n) => document.querySelectorAll('#bars > div').length === n &&
    document.getElementById('stats').textContent !== '', N_PREDICT, { timeout: 20000 });

  assert.equal(await page.inputValue('#prompt'), '', 'the prompt box is emptied on send');
  const log = await page.$$eval('#log > div', (divs) => divs.map((d) => [d.className, d.textContent]));
  assert.deepEqual(log, [['', '> Hello'], ['think', expected.reasoning], ['', expected.content]]);

  // one bar per token, each a compute, a flash wait and a cache management part
  const bars = await page.$$eval('#bars > div', (divs) => divs.map((d) =>
    [...d.children].map((part) => [part.className, parseFloat(part.style.height)])));
  assert.equal(bars.length, N_PREDICT);
  for (const [i, parts] of bars.entries()) {
    assert.deepEqual(parts.map(([name]) => name), ['c', 'f', 'm'], `bar ${i}`);
    const height = parts.reduce((sum, [, h]) => sum + h, 0);
    // a resident model waits for no flash: compute fills the bar
    assert.ok(height > 0 && height <= 80.01, `bar ${i} is ${height} px`);
    assert.ok(parts[0][1] > 0, `bar ${i} has no compute`);
  }
  assert.match(await page.textContent('#stats'),
    /^\d+\.\d tok\/s, hit rate - %, 0\.00 MiB read per token, \d+ prompt tokens reused$/);

  const artifacts = required('BMOE_ARTIFACT_DIR');
  mkdirSync(artifacts, { recursive: true });
  const screenshot = path.join(artifacts, 'server-page.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  assert.ok(statSync(screenshot).size > 0);
  console.log(`screenshot: ${screenshot}`);

  const [cancelled] = await Promise.all([
    page.waitForResponse((r) => r.url() === `${server.url}/api/cancel`),
    stop.click(),
  ]);
  assert.equal(cancelled.status(), 200);
  assert.deepEqual(await cancelled.json(), { cancelled: true });

  assert.deepEqual(outside, [], 'requests left 127.0.0.1');
  assert.ok(requested.includes(`${server.url}/api/info`) && requested.includes(`${server.url}/v1/chat/completions`),
    `the page's requests: ${requested.join(' ')}`);
  assert.deepEqual(errors, []);
  await context.close();
});
