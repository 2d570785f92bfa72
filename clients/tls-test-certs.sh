#!/usr/bin/env bash
# Certificates for the clients' TLS tests, made with the openssl command
# (Debian: openssl, which .ci/run installs). Usage: tls-test-certs.sh DIR
#
# Writes into DIR (PEM): ca.pem, a CA; server.pem and server-key.pem, a server
# certificate for 127.0.0.1 and localhost signed by it; client.pem and
# client-key.pem, a client certificate with the subject CN=team-a signed by it;
# other-ca.pem, a CA that signed nothing here. EC P-256 keys, valid two days.
set -euo pipefail
dir=${1:?usage: tls-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
  key "$1-key.pem"
  openssl req -x509 -new -key "$1-key.pem" -out "$1.pem" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}
# $1 name, $2 subject, $3 extensions file
leaf() {
  key "$1-key.pem"
  openssl req -new -key "$1-key.pem" -subj "$2" -out "$1.csr"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
    -extfile "$3" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr"
}
ca ca "keysmith client test CA"
ca other-ca "keysmith unrelated CA"
printf '%s\n' "basicConstraints=CA:FALSE" "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  "extendedKeyUsage=serverAuth" "keyUsage=digitalSignature" > server.ext
printf '%s\n' "basicConstraints=CA:FALSE" "extendedKeyUsage=clientAuth" \
  "keyUsage=digitalSignature" > client.ext
leaf server "/CN=127.0.0.1" server.ext
leaf client "/CN=team-a" client.ext
rm -f server.ext client.ext ca.srl ca-key.pem other-ca-key.pem
