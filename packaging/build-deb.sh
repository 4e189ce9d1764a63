#!/usr/bin/env bash
# Builds a Debian package of longhaul with dpkg-deb, Debian's own packager: the stripped
# binary; manual pages and bash, zsh and fish completions generated from the CLI's own
# definition (`longhaul man`, `longhaul completions`); the systemd unit and an annotated
# `serve` config from contrib/. Needs dpkg-deb, strip, objdump and gzip (Debian's
# dpkg, binutils, gzip).
#
# Usage: packaging/build-deb.sh [BIN] [OUT_DIR]
#   BIN      the longhaul to package (default target/release/longhaul, built if missing)
#   OUT_DIR  where the .deb goes (default target/deb); its path is printed last
#
# The package depends on the C library the binary needs (the highest GLIBC_ version its
# symbols name). It creates no user: the unit runs `serve` as user `longhaul`, so make one
# (`adduser --system --group --home /var/lib/longhaul longhaul`) and a token
# (`longhaul token --out /etc/longhaul/token`) before enabling it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/longhaul}
out=${2:-target/deb}
if [ ! -x "$bin" ]; then
  cargo build --release
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

install -D -m 0755 "$bin" "$stage/usr/bin/longhaul"
strip --strip-unneeded "$stage/usr/bin/longhaul"
lh="$stage/usr/bin/longhaul"

mkdir -p "$stage/usr/share/man/man1"
"$lh" man --out "$stage/usr/share/man/man1" >/dev/null
gzip -9n "$stage"/usr/share/man/man1/*.1
install -d "$stage/usr/share/bash-completion/completions" \
  "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
"$lh" completions bash > "$stage/usr/share/bash-completion/completions/longhaul"
"$lh" completions zsh > "$stage/usr/share/zsh/vendor-completions/_longhaul"
"$lh" completions fish > "$stage/usr/share/fish/vendor_completions.d/longhaul.fish"

install -D -m 0644 contrib/systemd/longhaul-serve.service \
  "$stage/lib/systemd/system/longhaul-serve.service"
install -D -m 0644 contrib/serve.toml "$stage/usr/share/doc/longhaul/examples/serve.toml"
cat > "$stage/usr/share/doc/longhaul/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: longhaul
License: MIT or Apache-2.0
COPYRIGHT

# The newest C library version the binary's symbols need.
glibc=$(objdump -T "$lh" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
size_kb=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: longhaul
Version: $version
Architecture: $arch
Maintainer: longhaul developers <longhaul@example.invalid>
Depends: libc6 (>= $glibc)
Section: net
Priority: optional
Installed-Size: $size_kb
Homepage: https://example.invalid/longhaul
Description: move data across long fat networks at line rate
 longhaul fills high bandwidth x long round-trip paths from an ordinary host:
 memory-to-memory path tests (bench), disk-to-disk copies of files and trees
 with integrity checks and resume (cp, sync) over ssh or a serve daemon, TLS 1.3
 on every connection, a user-space long-path emulator, host tuning advice and
 the Land Speed Record metric.
CONTROL

mkdir -p "$out"
deb="$out/longhaul_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
