#!/usr/bin/env bash
# Makes the cohort's TLS: a private CA and attn-server's certificate signed by it, with the
# Kubernetes objects that carry them (openssl only; no cert-manager in the cluster).
#
#   scripts/make-cohort-ca.sh [options] DIR
#
#   DIR               the host's private folder, outside any git work tree; made if missing, 0700
#   --external ADDR   also valid for ADDR, an IP or a DNS name (an external LoadBalancer's address;
#                     repeatable)
#   --namespace NS    attn-server's namespace (default: attn)
#   --cohort-namespace NS
#                     where the CA certificate's ConfigMap goes, for JupyterLab (default: attn-cohort)
#   --days N          the server certificate's validity (default: 90; the CA's: 365)
#
# Writes:
#   DIR/ca.key, DIR/ca.crt        the CA (EC P-256), made once: a re-run keeps it, so participants'
#                                 copies of ca.crt stay valid. ca.key 0600; keep it offline
#   DIR/tls.key, DIR/tls.crt      attn-server's key (0600) and certificate, re-issued on every run,
#                                 valid for the Services' names (attn-server and
#                                 attn-server-headless in NS, short and .svc.cluster.local forms),
#                                 localhost and 127.0.0.1 (kubectl port-forward), and every --external
#   DIR/attn-server-tls.secret.yaml
#                                 Secret attn-server-tls (kubernetes.io/tls: tls.crt, tls.key, ca.crt)
#                                 for `kubectl apply -f` (0600)
#   DIR/attn-cohort-ca.configmap.yaml
#                                 ConfigMap attn-cohort-ca (ca.crt only, no key) in the cohort's
#                                 namespace, which JupyterLab mounts
#   DIR/cohort-ca.crt             a copy of ca.crt to hand out with the tokens
#
# Once an external LoadBalancer has its address, run again with --external ADDR and apply the
# Secret: the CA stays, the server certificate gains the address.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit "${1:-2}"; }
die() { echo "make-cohort-ca: $*" >&2; exit 2; }

namespace=attn cohort_namespace=attn-cohort days=90 dir=""
external=()
while [ $# -gt 0 ]; do
  case $1 in
    --external) external+=("${2:?}"); shift 2 ;;
    --namespace) namespace=${2:?}; shift 2 ;;
    --cohort-namespace) cohort_namespace=${2:?}; shift 2 ;;
    --days) days=${2:?}; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) die "unknown option $1 (--help lists them)" ;;
    *) [ -z "$dir" ] || die "one DIR only (got '$dir' and '$1')"; dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || usage
command -v openssl >/dev/null || die "needs openssl (Debian package openssl)"
[[ $days =~ ^[1-9][0-9]*$ ]] || die "--days takes a positive number, not '$days'"
for ns in "$namespace" "$cohort_namespace"; do
  [[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "'$ns' is not a namespace name"
done

umask 077
existing=$dir
until [ -d "$existing" ]; do existing=$(dirname "$existing"); done
if top=$(git -C "$existing" rev-parse --show-toplevel 2>/dev/null); then
  die "$dir is inside the git work tree $top: keys must never be committed; use a folder outside it"
fi
mkdir -p "$dir"
cd "$dir"

# The names a client may use for attn-server: each Service, short and fully qualified.
sans=()
for svc in attn-server attn-server-headless; do
  sans+=("DNS:$svc" "DNS:$svc.$namespace" "DNS:$svc.$namespace.svc" "DNS:$svc.$namespace.svc.cluster.local")
done
sans+=("DNS:localhost" "IP:127.0.0.1")
for addr in "${external[@]}"; do
  if [[ $addr =~ ^[0-9.]+$ || $addr == *:* ]]; then
    sans+=("IP:$addr")
  elif [[ $addr =~ ^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$ ]]; then
    sans+=("DNS:$addr")
  else
    die "--external '$addr' is neither an IP address nor a DNS name"
  fi
done
san_list=$(IFS=,; echo "${sans[*]}")

if [ -f ca.key ] && [ -f ca.crt ]; then
  echo "make-cohort-ca: keeping the CA in $dir (ca.key, ca.crt)"
else
  openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -sha256 -days 365 -subj "/O=attn/CN=attn cohort CA" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" -out ca.crt
  echo "make-cohort-ca: made a CA in $dir (ca.key, ca.crt)"
fi

# The server's key and certificate, re-issued each run (new SANs, new expiry).
openssl ecparam -name prime256v1 -genkey -noout -out tls.key.tmp 2>/dev/null
openssl req -new -key tls.key.tmp -subj "/O=attn/CN=attn-server.$namespace.svc" -out tls.csr 2>/dev/null
cat >tls.ext <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=$san_list
EOF
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days "$days" \
  -extfile tls.ext -out tls.crt.tmp 2>/dev/null
rm -f tls.csr tls.ext ca.srl
openssl verify -CAfile ca.crt tls.crt.tmp >/dev/null || die "the new certificate does not verify against ca.crt"
mv -f tls.key.tmp tls.key && mv -f tls.crt.tmp tls.crt
chmod 600 ca.key tls.key
chmod 644 ca.crt tls.crt
cp ca.crt cohort-ca.crt && chmod 644 cohort-ca.crt

b64() { base64 -w0 <"$1"; }
{
  echo "# attn-server's TLS (scripts/make-cohort-ca.sh): kubectl apply -f attn-server-tls.secret.yaml"
  echo "apiVersion: v1"
  echo "kind: Secret"
  echo "metadata:"
  echo "  name: attn-server-tls"
  echo "  namespace: $namespace"
  echo "  labels:"
  echo "    app.kubernetes.io/name: attn-server"
  echo "    app.kubernetes.io/part-of: attn"
  echo "type: kubernetes.io/tls"
  echo "data:"
  echo "  tls.crt: $(b64 tls.crt)"
  echo "  tls.key: $(b64 tls.key)"
  echo "  ca.crt: $(b64 ca.crt)"
} >attn-server-tls.secret.yaml
{
  echo "# The cohort CA's certificate (public; no key), for JupyterLab: kubectl apply -f attn-cohort-ca.configmap.yaml"
  echo "apiVersion: v1"
  echo "kind: ConfigMap"
  echo "metadata:"
  echo "  name: attn-cohort-ca"
  echo "  namespace: $cohort_namespace"
  echo "  labels:"
  echo "    app.kubernetes.io/part-of: attn"
  echo "data:"
  echo "  ca.crt: |"
  sed 's/^/    /' ca.crt
} >attn-cohort-ca.configmap.yaml
chmod 600 attn-server-tls.secret.yaml

echo "make-cohort-ca: tls.crt valid $days days for ${sans[*]}"
echo "make-cohort-ca: kubectl apply -f $dir/attn-server-tls.secret.yaml -f $dir/attn-cohort-ca.configmap.yaml; hand out $dir/cohort-ca.crt"
