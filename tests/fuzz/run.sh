#!/usr/bin/env bash
# Runs every native Go fuzz target for FUZZTIME each (default 3s), one at a time: `go test`
# fuzzes one target per invocation. `make test` runs it short; `make fuzz` long
# (FUZZTIME=60s). A crash writes its input to the package's testdata/fuzz/<Target>/: fix the
# code and commit the input, which then runs as a seed in every `go test`.
set -uo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}

# package target: the strict decoder, the cursor codecs, the token parser, each provider's
# webhook parser, and the JSON guard in front of them all.
targets=(
  "./shared/jsonguard FuzzCheck"
  "./shared/httpapi FuzzDecode"
  "./shared/httpapi FuzzCursor"
  "./shared/store FuzzDecodeCursor"
  "./shared/auth FuzzParseToken"
  "./shared/auth FuzzAuthenticate"
  "./shared/channel/telegram FuzzParse"
  "./shared/channel/vk FuzzWebhook"
  "./shared/channel/whatsapp FuzzWebhook"
  "./shared/merge FuzzParse"
  "./functions/emaildomains/internal/mimemail FuzzParseMessage"
  "./functions/emailevents FuzzWebhook"
  "./shared/sns FuzzVerify"
  "./functions/content FuzzTidyText"
)

failed=0
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  for attempt in 1 2; do
    # -parallel 1: CI has two cores, and the engine's own workers compete with the build.
    out=$("$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel 1 "$pkg" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
      echo "fuzz: ok   $pkg $name ($FUZZTIME)"
      break
    fi
    # The engine sometimes ends a clean run with "context deadline exceeded" when its time
    # is up mid-exchange with a worker (no failing input): run the target once more.
    if [ $attempt -eq 1 ] && ! grep -q "Failing input written" <<<"$out" && grep -q "context deadline exceeded" <<<"$out"; then
      continue
    fi
    echo "fuzz: FAIL $pkg $name"
    echo "$out" | grep -v '^fuzz: elapsed'
    failed=1
    break
  done
done
exit $failed
