#!/usr/bin/env bash
# Builds the krew archive of `kubectl howfast` and its manifest (docs/kubectl.md):
#   deploy/krew/archive.sh WHEEL URI OUTDIR [HOMEPAGE]
# WHEEL: howfast's wheel (`uv build --wheel`); URI: where OUTDIR/howfast-krew-VERSION.tar.gz
# will be published. Writes that archive and OUTDIR/howfast.yaml, the template filled in
# with the version, URI and the archive's SHA-256. Nothing is downloaded or published.
set -euo pipefail
if (($# < 3)); then
    echo "usage: $0 WHEEL URI OUTDIR [HOMEPAGE]" >&2
    exit 2
fi
wheel=$1 uri=$2 out=$3 homepage=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$wheel")
if [[ ! -f $wheel || $name != howfast-*-py3-none-any.whl ]]; then
    echo "$0: $wheel is not a howfast wheel (howfast-VERSION-py3-none-any.whl)" >&2
    exit 2
fi
version=${name#howfast-}
version=${version%%-*}
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$here/kubectl-howfast" "$wheel" "$stage/"
chmod 755 "$stage/kubectl-howfast"
archive="$out/howfast-krew-$version.tar.gz"
# Sorted names, fixed owner and times: the same inputs give the same archive and SHA-256.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - \
    kubectl-howfast "$name" | gzip -n >"$archive"
sha=$(sha256sum "$archive" | cut -d' ' -f1)
# Without a HOMEPAGE the manifest has none (krew does not require one).
sed -e "s|@VERSION@|$version|g" -e "s|@URI@|$uri|g" -e "s|@SHA256@|$sha|g" \
    -e "$([[ -n $homepage ]] && echo "s|@HOMEPAGE@|$homepage|g" || echo '/@HOMEPAGE@/d')" \
    "$here/howfast.yaml" >"$out/howfast.yaml"
echo "$archive"
echo "$out/howfast.yaml"
