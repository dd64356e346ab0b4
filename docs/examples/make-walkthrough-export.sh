#!/usr/bin/env bash
# Makes the example regulator export of docs/examples (walkthrough.export.*):
# the README's walkthrough (forget of alice@example.com) on a fresh data
# directory, with a checkpoint saved before the forget and the export asked
# since that checkpoint's size. Run once from the repository's root; the
# files are committed and TestExampleExport (cmd/shredd) checks them. Needs
# go, curl and jq. The key cache TTL is 1s instead of 30s so that it ends
# in seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/examples
tmp=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/shredd" ./cmd/shredd
PORT=${PORT:-7759}
"$tmp/shredd" serve --data-dir "$tmp/data" --addr 127.0.0.1:$PORT --cache-ttl 1s 2>"$tmp/log" &
PID=$!
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done

U=http://127.0.0.1:$PORT
H="Authorization: Bearer $(cat "$tmp/data/admin.token")"
J="Content-Type: application/json"
b64() { printf %s "$1" | base64 -w0; }
CLI=("$tmp/shredd" --addr $U --token-file "$tmp/data/admin.token")

curl -sf -XPUT -H "$H" $U/v1/kinds/episodic >/dev/null
curl -sf -XPUT -H "$H" -H "$J" -d '{"description":"rolling summaries"}' $U/v1/kinds/summary >/dev/null
REC=$(curl -sf -H "$H" -H "$J" $U/v1/encrypt \
  -d "{\"subject\":\"alice@example.com\",\"kind\":\"episodic\",\"plaintext\":\"$(b64 'Alice prefers tea')\"}")
DEC=$(curl -sf -H "$H" -H "$J" $U/v1/decrypt -d "{\"ciphertext\":$(echo "$REC" | jq .ciphertext),\"holder\":\"demo\"}")
curl -sf -XPOST -H "$H" $U/v1/leases/$(echo "$DEC" | jq -r .lease.id)/release >/dev/null
curl -sf -H "$H" -H "$J" $U/v1/encrypt -d "{\"parents\":[$(echo "$REC" | jq .artifact)],
  \"subjects\":[\"bob@example.com\"],\"kind\":\"summary\",\"plaintext\":\"$(b64 'Alice and Bob like tea')\"}" >/dev/null
curl -sf -H "$H" -H "$J" $U/v1/encrypt -d "{\"subjects\":[\"alice@example.com\",\"bob@example.com\",
  \"carol@example.com\"],\"kind\":\"summary\",\"plaintext\":\"$(b64 'the team drinks tea')\"}" >/dev/null
curl -sf -H "$H" -H "$J" $U/v1/encrypt \
  -d "{\"subject\":\"bob@example.com\",\"kind\":\"episodic\",\"plaintext\":\"$(b64 'Bob prefers coffee')\"}" >/dev/null

# The regulator (or a log monitor) saves a checkpoint before the forget.
"${CLI[@]:0:1}" checkpoint "${CLI[@]:1}" --out "$out/walkthrough.export.checkpoint"
SINCE=$(sed -n 2p "$out/walkthrough.export.checkpoint")

FGT=$(curl -sf -H "$H" -H "$J" $U/v1/forget -d '{"subject":"alice@example.com"}')
F=$(echo "$FGT" | jq -r .forget)
SALT=$(echo "$FGT" | jq -r .commitment_salt)
curl -sf -XPOST -H "$H" $U/v1/epoch >/dev/null
sleep 2
STATE=$(curl -sf -XPOST -H "$H" $U/v1/forgets/$F/verify | jq -r .state)
[ "$STATE" = erased ] || { echo "forget $F is $STATE, not erased" >&2; exit 1; }

"${CLI[@]:0:1}" export "${CLI[@]:1}" --since "$SINCE" --out "$out/walkthrough.export.tar.gz" "$F"
cp "$tmp/data/attestation.pub" "$out/walkthrough.export.attestation.pub"
cp "$tmp/data/log.vkey" "$out/walkthrough.export.log.vkey"
cat > "$out/walkthrough.export.check" <<CHECK
export: walkthrough.export.tar.gz
forget: $F
key: walkthrough.export.attestation.pub
log-key: walkthrough.export.log.vkey
checkpoint: walkthrough.export.checkpoint
subject: alice@example.com
salt: $SALT
CHECK
echo "made $out/walkthrough.export.tar.gz (forget $F, since $SINCE)"
