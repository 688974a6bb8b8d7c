#!/usr/bin/env bash
# corpora.sh: gathers real text from this repository and a Debian machine
# into a temporary folder and runs measure.mjs on it. A measuring tool, not
# a test: not part of CI or `make test`. Run from anywhere:
#
#	scripts/tokens/corpora.sh [--files]
#
# Needs node and npm (installs the pinned tokenizers with `npm ci` if absent),
# go (builds the gateway's Caddy to write real JSON logs, on 127.0.0.1 only),
# curl, base64, and Debian's vim-runtime (its tutor in Japanese, Chinese and
# Russian is the non-English prose; `apt-get install vim-runtime`). A corpus
# whose files are missing is skipped with a note.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -d "$here/node_modules" ] || (cd "$here" && npm ci --silent)

# JSON: a tools/list-shaped lock file and the repository's package-locks
# (pretty-printed, as found), and the same minified.
json=("$repo/examples/contract/tools.lock.json" "$repo"/test/*/package-lock.json "$repo"/test/*/package.json)
mkdir -p "$work/min"
jsonmin=()
for f in "${json[@]}"; do
	out="$work/min/$(echo "${f#"$repo"/}" | tr / _)"
	node -e 'process.stdout.write(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))))' "$f" >"$out"
	jsonmin+=("$out")
done

# Logs: Caddy's own JSON logs (debug and access) from a real run of the
# gateway's Caddy serving docs/ on loopback, and Debian's dpkg.log.
caddylog="$work/caddy.log"
if command -v go >/dev/null && command -v curl >/dev/null; then
	(cd "$repo" && go build -o "$work/caddy" ./cmd/caddy)
	port=18931
	cat >"$work/Caddyfile" <<EOF
{
	admin off
	debug
	log {
		output file $caddylog
		format json
	}
}
http://127.0.0.1:$port {
	bind 127.0.0.1
	log {
		output file $caddylog
		format json
	}
	root * $repo/docs
	file_server browse
}
EOF
	XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/cfg" "$work/caddy" run --config "$work/Caddyfile" >"$work/caddy.out" 2>&1 &
	pid=$!
	for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
	for i in $(seq 60); do
		for p in / /architecture.md /security.md /nope "/model.md?x=$i"; do
			curl -s -o /dev/null -A "Mozilla/5.0 (X11; Linux x86_64) measure/$i" -H "X-Request-Id: req-$i" "http://127.0.0.1:$port$p"
		done
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
fi

# base64 of a binary, unwrapped (as an image or blob in a result is).
bin=$(command -v node)
head -c 49152 "$bin" | base64 -w0 >"$work/binary.b64"

tutor=/usr/share/vim/vim90/tutor
join() { local IFS=,; echo "$*"; }
specs=(
	"english-prose=$(join "$repo/LICENSE" /usr/share/common-licenses/GPL-3)"
	"english-markdown=$(join "$repo/README.md" "$repo"/docs/*.md)"
	"go-source=$(join "$repo"/handler/*.go)"
	"json-pretty=$(join "${json[@]}")"
	"json-minified=$(join "${jsonmin[@]}")"
	"log-caddy-json=$caddylog"
	"log-dpkg=/var/log/dpkg.log"
	"japanese=$tutor/tutor.ja.utf-8"
	"chinese=$tutor/tutor.zh_cn.utf-8"
	"russian=$tutor/tutor.ru.utf-8"
	"base64=$work/binary.b64"
)
run=()
for s in "${specs[@]}"; do
	ok=1
	IFS=, read -ra fs <<<"${s#*=}"
	for f in "${fs[@]}"; do [ -r "$f" ] || ok=0; done
	if [ "$ok" = 1 ]; then run+=("$s"); else echo "skipped ${s%%=*}: a file is missing" >&2; fi
done
node "$here/measure.mjs" "$@" "${run[@]}"
