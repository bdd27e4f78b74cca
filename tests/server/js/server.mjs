// The tests' side of bmoe-server: a generated tiny model and the server
// started on it as a child on a free loopback port (--port 0: the port is read
// from its "listening on" line), stopped by a signal with its exit status.
// The paths come from ctest's environment (tests/server/tests.cmake).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

export function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run the test through ctest)`);
  return value;
}

// A scratch folder of this test's own under BMOE_TEST_TMPDIR (as the C tests:
// the environment's, else the build folder's test-tmp).
export function scratch(name) {
  const dir = path.join(process.env.BMOE_TEST_TMPDIR || required('BMOE_TEST_TMPDIR_DEFAULT'), name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

// bmoe-mkmodel's tiny qwen3moe (random weights, a chat template) in dir.
export function makeModel(dir) {
  const model = path.join(dir, 'tiny.gguf');
  const binary = path.join(required('BMOE_BIN_DIR'), 'bmoe-mkmodel');
  const run = spawnSync(binary, ['--shape', 'tiny-qwen3moe', '--quiet', '-o', model], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`bmoe-mkmodel failed (${run.status}): ${run.error ?? run.stderr}`);
  return model;
}

// Starts bmoe-server with args (without --port) and resolves once it listens:
// { url, port, log(), stop(signal) -> exit status }.
export function startServer(args, { timeoutMs = 20000 } = {}) {
  const binary = path.join(required('BMOE_BIN_DIR'), 'bmoe-server');
  const child = spawn(binary, [...args, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => { err += text; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ? `signal ${signal}` : code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bmoe-server did not listen within ${timeoutMs} ms: ${err}`));
    }, timeoutMs);
    child.on('error', (error) => { clearTimeout(timer); reject(error); });
    const watch = () => {
      const found = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (!found) return;
      clearTimeout(timer);
      child.stderr.off('data', watch);
      const port = Number(found[1]);
      resolve({
        port,
        url: `http://127.0.0.1:${port}`,
        log: () => err,
        stop: async (signal = 'SIGTERM') => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
      });
    };
    child.stderr.on('data', watch);
    exited.then((status) => {
      clearTimeout(timer);
      reject(new Error(`bmoe-server exited (${status}) before listening: ${err}`));
    });
  });
}

// What promise rejects with (it must reject).
export async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('the request was expected to fail');
}
