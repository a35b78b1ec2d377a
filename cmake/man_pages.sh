#!/usr/bin/env bash
# A man page per command, from each --help (help2man): sdcprobe.1 and sdcprobe-SUB.1 for every
# subcommand the binary lists, nested ones too (sdcprobe-golden-record.1), gzipped into OUTDIR.
#   cmake/man_pages.sh HELP2MAN SDCPROBE OUTDIR
set -euo pipefail
help2man=$1 sdcprobe=$(readlink -f "$2") out=$3
mkdir -p "$out"
rm -f "$out"/*.1.gz
version=$("$sdcprobe" --version | cut -d' ' -f2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "  name   description" lines under "Subcommands:" in a --help text.
subcommands() { sed -n '/^Subcommands:/,/^$/{/^  [a-z]/p}' | sed 's/^  \([a-z-]*\) *\(.*\)/\1\t\2/'; }

# A program named after the page, so that help2man titles it (sdcprobe-golden-record), running the
# subcommand with argv[0] "sdcprobe": its usage line then names no build path.
page() {  # NAME DESCRIPTION WORDS...
  local name=$1 description=$2
  shift 2
  printf '#!/usr/bin/env bash\nif [ "$1" = --version ]; then echo "%s %s"; exit; fi\nexec -a sdcprobe %q %s "$@"\n' \
    "$name" "$version" "$sdcprobe" "$*" >"$work/$name"
  chmod +x "$work/$name"
  "$help2man" --no-info --no-discard-stderr --section 1 --source "sdcprobe $version" --name "$description" \
    --include "$work/see-also" --output "$work/$name.1" "$work/$name"
  gzip -9n <"$work/$name.1" >"$out/$name.1.gz"
}

pages=()
while IFS=$'\t' read -r sub description; do
  nested=$("$sdcprobe" "$sub" --help | subcommands)
  if [ -n "$nested" ]; then
    while IFS=$'\t' read -r inner inner_description; do
      pages+=("sdcprobe-$sub-$inner"$'\t'"$inner_description"$'\t'"$sub $inner")
    done <<<"$nested"
  else
    pages+=("sdcprobe-$sub"$'\t'"$description"$'\t'"$sub")
  fi
done < <("$sdcprobe" --help | subcommands)

{
  echo "[SEE ALSO]"
  for p in "${pages[@]}"; do echo ".BR ${p%%$'\t'*} (1),"; done
  echo ".BR sdcprobe (1)"
} >"$work/see-also"
page sdcprobe "find GPUs and CPUs that compute wrong answers"
for p in "${pages[@]}"; do
  IFS=$'\t' read -r name description words <<<"$p"
  # shellcheck disable=SC2086  # the subcommand's words
  page "$name" "$description" $words
done
