#!/usr/bin/env bash
# symlink-db.sh's case as a test: `db merge` and `tune` with --db a symbolic link (absolute, relative, a chain, and
# dangling) write the link's target, lock beside the target, and leave the link a link.
# Usage: symlink_db.sh CONVTUNE REPRO_DIR WORK_DIR
set -u
bin=$1 repro=$2 work=$3
fail() { echo "symlink_db.sh: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/real" || exit 1
cd "$work" || exit 1
cp "$repro/db-valid-for-symlink.json" real/tuning.json
# The sound entry to merge: the valid file's cpu_blocked entry with another problem (H=9), so the merge adds it.
sed 's/H=8,W=8/H=9,W=9/; s/"H": 8/"H": 9/; s/"W": 8/"W": 9/' "$repro/db-valid-for-symlink.json" >other.json
ln -s "$work/real/tuning.json" absolute.json
ln -s real/tuning.json relative.json
ln -s relative.json chain.json
for link in absolute.json relative.json chain.json; do
  out=$("$bin" db merge other.json --db "$link" 2>&1) || fail "db merge through $link: exit $?: $out"
  echo "$out"
  [ -L "$link" ] || fail "$link is no longer a symbolic link"
  grep -q '"H": 9' real/tuning.json || fail "the target was not written through $link"
  [ -e real/tuning.json.lock ] || fail "no lock beside the target"
  [ ! -e "$link.lock" ] || fail "a lock beside the link $link"
  ls "$work" | grep -q '\.tmp\.' && fail "a temporary file was left beside the link"
  # A second merge of the same file changes nothing, but the file is still the target's.
  [ "$(grep -c '"family"' real/tuning.json)" = 4 ] || fail "expected 4 entries after merging through $link"
done
# A dangling link: its target is created, the link kept.
ln -s "$work/real/new.json" dangling.json
"$bin" db merge other.json --db dangling.json || fail "db merge through a dangling link"
[ -L dangling.json ] && [ -f real/new.json ] || fail "the dangling link's target was not created, or the link replaced"
# tune through a link: the entry lands in the target.
ln -s real/tuned.json tuned-link.json
"$bin" tune --layer N=1,C=4,H=8,K=4,R=3,pad=1 --device cpu --family cpu_direct --direction fwd --budget 60s \
  --max-candidates 2 --no-peak --db tuned-link.json --log tune-log.json || fail "tune through a link: exit $?"
[ -L tuned-link.json ] && grep -q '"family": "cpu_direct"' real/tuned.json || fail "tune did not write the link's target"
echo "symlink_db.sh: every write went through the link to its target"
