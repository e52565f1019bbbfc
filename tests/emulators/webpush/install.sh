#!/usr/bin/env bash
# Installs the push service emulator the browser push tests send to, the npm package
# web-push-testing, into .cache/webpush (ignored by git), never globally. Skipped when this
# very version is installed. tests/webpush_test.go starts it with server.js beside this
# script, bound to 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
dir="$root/.cache/webpush"
version=1.2.2
command -v npm >/dev/null || { echo "webpush emulator: npm not found: it installs web-push-testing@$version" >&2; exit 1; }
if ! grep -qs "\"version\": \"$version\"" "$dir/node_modules/web-push-testing/package.json"; then
	echo "webpush emulator: installing web-push-testing@$version into .cache/webpush" >&2
	mkdir -p "$dir"
	npm install --prefix "$dir" "web-push-testing@$version" --no-audit --no-fund --loglevel=error >&2
fi
