#!/usr/bin/env bash
# Mints bearer tokens for a workshop cohort, in one step: attn-server's tokens file (hashes only)
# and the Kubernetes Secret that carries it, a Secret per participant that the cohort's JupyterHub
# gives to that participant's notebook server alone (as ATTN_TOKEN), the hub's list of who has a
# token, and the list the host hands out (the tokens themselves, for the CLI).
#
#   scripts/mint-tokens.sh [options] DIR [NAME...]
#
#   DIR              the host's private folder, outside any git work tree (the script refuses
#                    one inside); made if missing, 0700
#   NAME...          participants to add (1-64 of A-Z a-z 0-9 . _ -; for a notebook server on the
#                    cohort's JupyterHub, the hub username: a lowercase letter, then lowercase
#                    letters, digits and single '-', at most 48, as --count's names are)
#   --count N        add N participants named PREFIX01, PREFIX02, ... (after those already there)
#   --prefix P       the prefix for --count (default: participant)
#   --admin NAME     add NAME with the admin role (large suite, long jobs, any backend)
#   --rotate NAME    give NAME a new token (the old one stops working once the Secret is applied)
#   --remove NAME    drop NAME (its token stops working once the Secret is applied)
#   --namespace NS   the Secret's namespace (default: attn)
#   --secret NAME    the Secret's name (default: attn-server-tokens)
#   --cohort-namespace NS
#                    the notebook servers' namespace, for their Secrets (default: attn-cohort)
#
# Writes, every file 0600:
#   DIR/tokens.txt                        NAME SHA256_HEX [ROLE] [key=value ...], as attn-server's
#                                         --tokens_file reads it: the SHA-256 (lowercase hex) of the
#                                         token's text, never the token
#   DIR/attn-server-tokens.secret.yaml    the Secret (key tokens.txt) for `kubectl apply -f`
#   DIR/handout.txt                       NAME TOKEN, one line each: what the host hands out
#   DIR/attn-notebook-tokens.secret.yaml  a Secret attn-token-NAME (key token) per participant with
#                                         a hub username, in the cohort's namespace: JupyterHub's
#                                         KubeSpawner puts it in NAME's pod alone as ATTN_TOKEN
#   DIR/attn-hub-participants.configmap.yaml
#                                         ConfigMap attn-hub-participants (participants.txt: NAME
#                                         ROLE, no tokens): who may start a notebook server, and
#                                         the hosts (admins), for the hub
#
# Re-running with DIR adds to what is there: existing participants keep their tokens (and any
# role or key=value overrides edited into tokens.txt), new names get new ones. `kubectl apply -f
# DIR/attn-server-tokens.secret.yaml` then updates the Secret in place; the kubelet refreshes the
# mounted file within about a minute and attn-server takes it without a restart. Apply the other
# two files the same way (a removed participant's Secret: kubectl -n attn-cohort delete secret
# attn-token-NAME, which the script prints).
#
# A token is "attn_" and 32 random bytes (/dev/urandom) in unpadded base64url: 48 characters.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit "${1:-2}"; }
die() { echo "mint-tokens: $*" >&2; exit 2; }

count=0 prefix=participant namespace=attn secret=attn-server-tokens cohort_namespace=attn-cohort dir=""
names=() admins=() rotate=() remove=()
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=${2:?}; shift 2 ;;
    --prefix) prefix=${2:?}; shift 2 ;;
    --admin) admins+=("${2:?}"); shift 2 ;;
    --rotate) rotate+=("${2:?}"); shift 2 ;;
    --remove) remove+=("${2:?}"); shift 2 ;;
    --namespace) namespace=${2:?}; shift 2 ;;
    --secret) secret=${2:?}; shift 2 ;;
    --cohort-namespace) cohort_namespace=${2:?}; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) die "unknown option $1 (--help lists them)" ;;
    *) if [ -z "$dir" ]; then dir=$1; else names+=("$1"); fi; shift ;;
  esac
done
[ -n "$dir" ] || usage
[[ $count =~ ^[0-9]+$ ]] || die "--count takes a number, not '$count'"
valid_name() { [[ $1 =~ ^[A-Za-z0-9._-]{1,64}$ ]]; }
for n in "${names[@]}" "${admins[@]}" "${rotate[@]}" "${remove[@]}" "${prefix}01"; do
  valid_name "$n" || die "'$n' is not a valid name (1-64 of A-Z a-z 0-9 . _ -)"
done
for ns in "$namespace" "$cohort_namespace"; do
  [[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "'$ns' is not a namespace name"
done
# A JupyterHub username that KubeSpawner keeps as it is in object names (its "safe" slug), so the
# Secret attn-token-NAME is the one the hub's pod for NAME names.
hub_name() { [[ $1 =~ ^[a-z]([-a-z0-9]{0,46}[a-z0-9])?$ && $1 != *--* ]]; }
[[ $secret =~ ^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$ ]] || die "'$secret' is not a Secret name"

umask 077
existing=$dir
until [ -d "$existing" ]; do existing=$(dirname "$existing"); done
if top=$(git -C "$existing" rev-parse --show-toplevel 2>/dev/null); then
  die "$dir is inside the git work tree $top: tokens must never be committed; use a folder outside it"
fi
mkdir -p "$dir"
tokens=$dir/tokens.txt handout=$dir/handout.txt manifest=$dir/attn-server-tokens.secret.yaml
notebook_secrets=$dir/attn-notebook-tokens.secret.yaml participants=$dir/attn-hub-participants.configmap.yaml

# The current state: tokens.txt's participant lines (kept verbatim) and handout.txt's tokens.
declare -A line token
order=()
if [ -f "$tokens" ]; then
  while read -r n rest; do
    [ -n "$n" ] && [ "${n:0:1}" != "#" ] || continue
    line[$n]="$n $rest"
    order+=("$n")
  done <"$tokens"
fi
if [ -f "$handout" ]; then
  while read -r n t; do
    [ -n "$n" ] && [ "${n:0:1}" != "#" ] || continue
    token[$n]=$t
  done <"$handout"
fi

mint() {  # mint NAME ROLE: a new token for NAME (replacing any it had)
  local t hash
  t=attn_$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')
  hash=$(printf '%s' "$t" | sha256sum | cut -d' ' -f1)
  [ -n "${line[$1]+x}" ] || order+=("$1")
  line[$1]="$1 $hash${2:+ $2}"
  token[$1]=$t
}

added=0 rotated=0 removed=0 kept=0
add() {  # add NAME [ROLE]
  if [ -n "${line[$1]+x}" ]; then
    echo "mint-tokens: $1 is already there; keeping its token (--rotate $1 for a new one)" >&2
    kept=$((kept + 1))
  else
    mint "$1" "${2:-}"
    added=$((added + 1))
  fi
}
for n in "${names[@]}"; do add "$n"; done
for n in "${admins[@]}"; do add "$n" admin; done
if [ "$count" -gt 0 ]; then
  i=1
  while [ "$count" -gt 0 ]; do
    n=$(printf '%s%02d' "$prefix" "$i")
    if [ -z "${line[$n]+x}" ]; then mint "$n" ""; added=$((added + 1)); count=$((count - 1)); fi
    i=$((i + 1))
  done
fi
for n in "${rotate[@]}"; do
  [ -n "${line[$n]+x}" ] || die "--rotate $n: no such participant in $tokens"
  # Keep the role and key=value overrides; only the hash changes.
  read -r _ _ rest <<<"${line[$n]}"
  mint "$n" "$rest"
  rotated=$((rotated + 1))
done
for n in "${remove[@]}"; do
  [ -n "${line[$n]+x}" ] || die "--remove $n: no such participant in $tokens"
  unset "line[$n]" "token[$n]"
  removed=$((removed + 1))
done

# Write each file to a temporary name in DIR, then rename: a crash leaves the old set whole.
{
  echo "# attn-server --tokens_file: NAME SHA256_HEX_OF_TOKEN [ROLE] [key=value ...]"
  echo "# Made by scripts/mint-tokens.sh; hashes only, the tokens are in handout.txt."
  for n in "${order[@]}"; do [ -z "${line[$n]+x}" ] || echo "${line[$n]}"; done
} >"$tokens.tmp"
{
  echo "# NAME TOKEN: hand each participant their line; keep this file private."
  for n in "${order[@]}"; do
    if [ -n "${line[$n]+x}" ]; then
      if [ -n "${token[$n]:-}" ]; then echo "$n ${token[$n]}"; else echo "# $n: token not in this handout (minted elsewhere)"; fi
    fi
  done
} >"$handout.tmp"
{
  echo "# attn-server's tokens file (scripts/mint-tokens.sh): kubectl apply -f $(basename "$manifest")"
  echo "apiVersion: v1"
  echo "kind: Secret"
  echo "metadata:"
  echo "  name: $secret"
  echo "  namespace: $namespace"
  echo "  labels:"
  echo "    app.kubernetes.io/name: attn-server"
  echo "    app.kubernetes.io/part-of: attn"
  echo "type: Opaque"
  echo "data:"
  echo "  tokens.txt: $(base64 -w0 <"$tokens.tmp")"
} >"$manifest.tmp"
# The notebook servers' side: a Secret per participant with a hub username and a token here, and
# the hub's list of names and roles (no tokens, no hashes).
no_hub=()
{
  echo "# Each participant's token for their notebook server (scripts/mint-tokens.sh): kubectl apply -f $(basename "$notebook_secrets")"
  for n in "${order[@]}"; do
    [ -n "${line[$n]+x}" ] && [ -n "${token[$n]:-}" ] || continue
    if ! hub_name "$n"; then no_hub+=("$n"); continue; fi
    echo "---"
    echo "apiVersion: v1"
    echo "kind: Secret"
    echo "metadata:"
    echo "  name: attn-token-$n"
    echo "  namespace: $cohort_namespace"
    echo "  labels:"
    echo "    app.kubernetes.io/name: attn-notebook"
    echo "    app.kubernetes.io/part-of: attn"
    echo "    app.kubernetes.io/component: participant-token"
    echo "type: Opaque"
    echo "data:"
    echo "  token: $(printf '%s' "${token[$n]}" | base64 -w0)"
  done
} >"$notebook_secrets.tmp"
{
  echo "# Who may start a notebook server on the cohort's JupyterHub, and who hosts (scripts/mint-tokens.sh): kubectl apply -f $(basename "$participants")"
  echo "apiVersion: v1"
  echo "kind: ConfigMap"
  echo "metadata:"
  echo "  name: attn-hub-participants"
  echo "  namespace: $cohort_namespace"
  echo "  labels:"
  echo "    app.kubernetes.io/name: attn-hub"
  echo "    app.kubernetes.io/part-of: attn"
  echo "data:"
  echo "  participants.txt: |"
  echo "    # NAME ROLE"
  for n in "${order[@]}"; do
    [ -n "${line[$n]+x}" ] && hub_name "$n" || continue
    read -r _ _ role _ <<<"${line[$n]}"
    [ "$role" = admin ] || role=participant
    echo "    $n $role"
  done
} >"$participants.tmp"
chmod 600 "$tokens.tmp" "$handout.tmp" "$manifest.tmp" "$notebook_secrets.tmp" "$participants.tmp"
mv -f "$tokens.tmp" "$tokens" && mv -f "$handout.tmp" "$handout" && mv -f "$manifest.tmp" "$manifest" \
  && mv -f "$notebook_secrets.tmp" "$notebook_secrets" && mv -f "$participants.tmp" "$participants"

total=$(grep -cv '^#' "$tokens" || true)
echo "mint-tokens: $total participants in $tokens ($added added, $rotated rotated, $removed removed, $kept already there)"
for n in "${no_hub[@]}"; do
  echo "mint-tokens: $n has no notebook server Secret: a hub username is a lowercase letter, then lowercase letters, digits and single '-' (at most 48)" >&2
done
for n in "${remove[@]}"; do
  echo "mint-tokens: $n removed; also: kubectl -n $cohort_namespace delete secret attn-token-$n --ignore-not-found"
done
echo "mint-tokens: hand out $handout; then: kubectl apply -f $manifest -f $notebook_secrets -f $participants"
