#!/usr/bin/env bash
# Prepares a release: sets every requirement between Postbox's modules to the version given, points go.work's
# replacements at it, tidies every module against the modules as they are in the working tree, runs the consumer
# check, commits, and tags every published module.
#
#	scripts/release.sh v0.2.0           # prepare, commit and tag locally; push with the command it prints
#	scripts/release.sh -n v0.2.0        # set the versions and tidy only: no commit, no tags
#
# A module at directory dir is tagged dir/vX.Y.Z (the core, at the root, vX.Y.Z), as the go command expects of a
# multi-module repository. Test-only modules (internal/…, bench, chaos, examples) are never tagged: no published
# module requires them.
set -euo pipefail
cd "$(dirname "$0")/.."

dry=
if [ "${1:-}" = "-n" ]; then
	dry=1
	shift
fi
version=${1:-}
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "usage: scripts/release.sh [-n] vX.Y.Z   (got \"${version}\": a semantic version with a leading v)" >&2
	exit 2
fi
if [ -z "$dry" ] && [ -n "$(git status --porcelain)" ]; then
	echo "the working tree has uncommitted changes; commit or stash them first" >&2
	exit 1
fi

prefix=github.com/postbox-go/postbox
# Every module of the workspace, as "directory module-path".
mods=$(go work edit -json | python3 -c '
import json, subprocess, sys
for u in json.load(sys.stdin)["Use"]:
    d = u["DiskPath"]
    m = json.loads(subprocess.check_output(["go", "mod", "edit", "-json"], cwd=d))["Module"]["Path"]
    print(d, m)')

while read -r dir mod; do
	# Every requirement on a sibling module moves to the version.
	reqs=$(cd "$dir" && go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Require") or []:
    if r["Path"].startswith("'"$prefix"'"):
        print(r["Path"])')
	for r in $reqs; do
		(cd "$dir" && go mod edit -require="$r@$version")
	done
done <<<"$mods"

# go.work uses each local directory at that version too, so that no build asks the proxy for an untagged version.
sed -i '/^\/\/ Every module requires its siblings/,$d' go.work
{
	echo "// Every module requires its siblings at the version scripts/release.sh last set; these lines make the workspace"
	echo "// use the local directories at that version too, so that a build never asks the module proxy for a version that"
	echo "// is not tagged yet. scripts/release.sh rewrites them."
	echo "replace ("
	while read -r dir mod; do
		printf '\t%s %s => %s\n' "$mod" "$version" "$dir"
	done <<<"$mods"
	echo ")"
} >>go.work
go work edit -fmt

# Tidy every module against the tree packed at the version (our own modules' hashes are left out of go.sum:
# the workspace replaces them), then prove a consumer outside the repository can use the result.
go run ./internal/consumercheck -version "$version" -tidy
go run ./internal/consumercheck -version "$version"
if [ -n "$dry" ]; then
	echo "versions set to $version and modules tidied; nothing committed (-n)"
	exit 0
fi

git add -A
git commit -m "Release $version"
tags=()
while read -r dir mod; do
	case $mod in
	"$prefix"/internal/* | "$prefix"/bench | "$prefix"/chaos | "$prefix"/examples) continue ;;
	esac
	if [ "$dir" = "." ]; then
		tag=$version
	else
		tag=${dir#./}/$version
	fi
	git tag -a "$tag" -m "$mod $version"
	tags+=("$tag")
done <<<"$mods"
echo "tagged ${#tags[@]} modules at $version; publish with:"
echo "  git push origin HEAD ${tags[*]}"
