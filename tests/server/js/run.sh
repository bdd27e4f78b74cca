#!/usr/bin/env bash
# Runs one of bmoe-server's client tests (api, ollama, anthropic or page: NAME.test.mjs here)
# under Node's test runner, once what it needs is known to be here: a missing
# piece fails the test with one line naming it.
set -u
cd "$(dirname "$0")"
name=${1:?usage: run.sh api|ollama|anthropic|page}
fail() {
  echo "test_server_${name}_js: $*" >&2
  exit 1
}
command -v node >/dev/null || fail "node is not installed (scripts/setup.sh installs nodejs and npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] ||
  fail "node $(node --version) is too old: openai and playwright-core need Node.js 20 or later"
cmp -s package-lock.json node_modules/.bmoe-installed-lock ||
  fail "tests/server/js/node_modules is missing or not installed from package-lock.json (scripts/setup.sh runs npm ci)"
if [ "$name" = page ]; then
  chromium=${BMOE_CHROMIUM:-/usr/bin/chromium}
  [ -x "$chromium" ] || fail "no Chromium at $chromium (scripts/setup.sh installs Debian's chromium)"
fi
exec node --test --test-reporter=spec "$name.test.mjs"
