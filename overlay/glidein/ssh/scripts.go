package ssh

import (
	"strings"

	"github.com/pond-htc/pond/overlay/glidein"
)

// The site works on a host through these POSIX shell scripts, run as
// `sh -c SCRIPT sh ARGS...` in an SSH session: the login shell only has to
// understand single quotes. Data (the binary, the files, the environment)
// goes through the session's standard input, never on a command line.
//
// Every script starts by making the base directory ($1) absolute: "~",
// "~/x" and relative paths are relative to the remote $HOME. A host's
// glideins are in BASE/hosts/HOSTKEY/ID, so hosts that share a home
// directory (NFS) keep theirs apart; binaries are in BASE/bin.

const resolveBase = `umask 077
base=$1
case $base in
"~") base=$HOME ;;
"~/"*) base=$HOME/${base#"~/"} ;;
/*) ;;
*) base=$HOME/$base ;;
esac
`

// procScan defines members SID START: the PIDs of the live processes of
// session SID started at or after START (clock ticks since boot).
const procScan = `members() {
	for f in /proc/[0-9]*/stat; do
		{ read -r l < "$f"; } 2>/dev/null || continue
		p=${f#/proc/}; p=${p%/stat}
		r=${l##*) }
		set -- $r
		[ "$4" = "$sid" ] || continue
		[ "$1" = Z ] && continue
		[ "${20}" -ge "${start:-0}" ] 2>/dev/null || continue
		printf '%s ' "$p"
	done
}
`

// listScript: BASE HOSTKEY PREFIX. Prints the listing parseListing reads.
// The processes are read after the markers, and the markers of the
// glideins that had recorded no exit status are read again after the
// processes: a glidein whose wrapper wrote its status and ended between
// the two reads is then seen with its status, not as killed.
var listScript = resolveBase + `hd=$base/hosts/$2
show() {
	printf '@glidein %s\n' "${1##*/}"
	if [ -f "$1/` + markerFile + `" ]; then
		cat "$1/` + markerFile + `"
		printf '\n@end\n'
		st=$(sed -n 's/^status=//p' "$1/` + markerFile + `")
		case $st in ` + itoa(glidein.ExitValidation) + `)
			# Why its validation failed: its status file, bounded, on
			# one line (control characters, newlines among them, out).
			for f in "$1/` + glidein.StatusFile + `" "$1/data/` + glidein.StatusFile + `"; do
				[ -f "$f" ] && printf '@status %s\n' "$(head -c ` + itoa(maxStatusFile) + ` "$f" | tr -d '\000-\037\177')"
			done ;;
		esac
		s=$(sed -n 's/^sid=\([0-9][0-9]*\)$/\1/p' "$1/` + markerFile + `")
		[ -n "$s" ] && ids="$ids $s"
		[ -z "$st" ] && again="$again ${1##*/}"
	else
		printf '@nomarker %s\n' "$(date -r "$1" +%s 2>/dev/null || echo 0)"
	fi
}
printf '@host %s %s %s\n' "$(uname -s)" "$(uname -m)" "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo -)"
printf '@base %s\n' "$base"
for b in "$base"/bin/pondctl-*; do
	[ -f "$b" ] && printf '@bin %s\n' "${b##*/pondctl-}"
done
[ -d "$hd" ] || exit 0
ids=
again=
for d in "$hd/$3"*; do
	[ -d "$d" ] || continue
	show "$d"
done
[ -n "$ids" ] || exit 0
ids="$ids "
for f in /proc/[0-9]*/stat; do
	{ read -r l < "$f"; } 2>/dev/null || continue
	p=${f#/proc/}; p=${p%/stat}
	r=${l##*) }
	set -- $r
	case $ids in *" $4 "*|*" $p "*) printf '@proc %s %s %s %s\n' "$p" "$4" "${20}" "$1" ;; esac
done
for g in $again; do
	[ -d "$hd/$g" ] && show "$hd/$g"
done
exit 0
`

// checkScript: BASE HOSTKEY. Fails, saying why, unless the host has the
// commands the site uses and the base directory is writable.
const checkScript = resolveBase + `missing=
for c in sh setsid timeout sed cat mkdir mv rm chmod uname date kill head tr; do
	command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
command -v sha256sum >/dev/null 2>&1 || command -v shasum >/dev/null 2>&1 || missing="$missing sha256sum"
[ -z "$missing" ] || { echo "missing commands:$missing" >&2; exit 1; }
[ -r /proc/self/stat ] || { echo "no /proc: the site needs Linux's /proc to follow its processes" >&2; exit 1; }
mkdir -p "$base/hosts/$2" || exit 1
t=$base/hosts/$2/.check.$$
: > "$t" || { echo "base directory $base is not writable" >&2; exit 1; }
rm -f "$t"
`

// sumFunc defines sum FILE: its sha256, in hex.
const sumFunc = `sum() {
	if command -v sha256sum >/dev/null 2>&1; then s=$(sha256sum < "$1") || return 1
	else s=$(shasum -a 256 < "$1") || return 1; fi
	printf '%s\n' "${s%% *}"
}
`

// haveBinaryScript: BASE SHA VERIFY. Prints "absent", "present" or, when
// VERIFY is 1, the checksum of BASE/bin/pondctl-SHA.
const haveBinaryScript = resolveBase + sumFunc + `b=$base/bin/pondctl-$2
[ -f "$b" ] || { echo absent; exit 0; }
[ "$3" = 1 ] || { echo present; exit 0; }
sum "$b"
`

// putBinaryScript: BASE SHA. Stores standard input as BASE/bin/pondctl-SHA
// if its checksum is SHA.
const putBinaryScript = resolveBase + sumFunc + `mkdir -p "$base/bin" || exit 1
t=$base/bin/.pondctl-$2.$$
cat > "$t" || { rm -f "$t"; exit 1; }
got=$(sum "$t") || { rm -f "$t"; exit 1; }
if [ "$got" != "$2" ]; then rm -f "$t"; echo "the copy's sha256 is $got, not $2" >&2; exit 1; fi
chmod 700 "$t" && mv -f "$t" "$base/bin/pondctl-$2"
`

// exitExists is the status createScript exits with when the glidein's
// directory exists.
const exitExists = 17

// createScript: BASE HOSTKEY ID MARKER WRAPPER. Creates the glidein's
// directory, failing with exitExists if it exists, and writes its marker
// (first, so that a directory without one is only a moment old or the
// trace of a crash), standard input as its environment file, and its
// wrapper.
const createScript = resolveBase + `hd=$base/hosts/$2
d=$hd/$3
mkdir -p "$hd" || exit 1
if ! mkdir "$d" 2>/dev/null; then
	[ -e "$d" ] && exit 17
	mkdir "$d" || exit 1
fi
printf '%s' "$4" > "$d/.marker.tmp" && mv -f "$d/.marker.tmp" "$d/` + markerFile + `" || exit 1
cat > "$d/` + envFile + `" || exit 1
printf '%s' "$5" > "$d/` + wrapperFile + `" && chmod 700 "$d/` + wrapperFile + `"
`

// writeScript: BASE HOSTKEY ID NAME MODE. Writes standard input to the
// glidein's file NAME with MODE.
const writeScript = resolveBase + `d=$base/hosts/$2/$3
[ -d "$d" ] || { echo "$d is gone" >&2; exit 1; }
t=$d/.write.$$
cat > "$t" && chmod "$5" "$t" && mv -f "$t" "$d/$4"
`

// startScript: BASE HOSTKEY ID. Starts the wrapper in a session of its
// own, detached, and prints its session once it has recorded it.
const startScript = resolveBase + `d=$base/hosts/$2/$3
cd "$d" || exit 1
[ -f ` + markerFile + ` ] && [ -f ` + wrapperFile + ` ] || { echo "the files of $d are missing" >&2; exit 1; }
setsid sh ./` + wrapperFile + ` </dev/null >>` + logFile + ` 2>&1 &
i=0
while [ $i -lt 100 ]; do
	s=$(sed -n 's/^sid=\([0-9][0-9]*\)$/\1/p' ` + markerFile + `)
	[ -n "$s" ] && { printf '%s\n' "$s"; exit 0; }
	sleep 0.05 2>/dev/null || sleep 1
	i=$((i+1))
done
echo "the glidein did not record its process within 5 s: see $d/` + logFile + `" >&2
exit 1
`

// cancelScript: BASE HOSTKEY ID GRACE. Sends TERM to every process of
// the glidein's session, KILL to those left after GRACE seconds, removes
// its directory and prints "cancelled"; prints "absent" when there is no
// such glidein.
const cancelScript = resolveBase + procScan + `d=$base/hosts/$2/$3
[ -d "$d" ] || { echo absent; exit 0; }
m=$d/` + markerFile + `
sid=$(sed -n 's/^sid=\([0-9][0-9]*\)$/\1/p' "$m" 2>/dev/null)
start=$(sed -n 's/^start=\([0-9][0-9]*\)$/\1/p' "$m" 2>/dev/null)
boot=$(sed -n 's/^boot=//p' "$m" 2>/dev/null)
now=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo -)
if [ -n "$sid" ] && [ "$boot" = "$now" ]; then
	ours=1
	if { read -r l < "/proc/$sid/stat"; } 2>/dev/null; then
		r=${l##*) }
		set -- $r
		[ "${20}" = "$start" ] || ours=
	fi
	if [ -n "$ours" ]; then
		ps=$(members)
		[ -n "$ps" ] && kill -TERM $ps 2>/dev/null
		i=0
		while [ -n "$ps" ] && [ $i -lt $(($4 * 10)) ]; do
			sleep 0.1 2>/dev/null || sleep 1
			ps=$(members)
			i=$((i+1))
		done
		[ -n "$ps" ] && kill -KILL $ps 2>/dev/null
		i=0
		while [ -n "$ps" ] && [ $i -lt 50 ]; do
			sleep 0.1 2>/dev/null || sleep 1
			ps=$(members)
			i=$((i+1))
		done
		[ -z "$ps" ] || { echo "processes $ps of $3 survived KILL" >&2; exit 1; }
	fi
fi
rm -rf "$d" || exit 1
echo cancelled
`

// wrapperScript returns the glidein's wrapper, started by startScript in
// the glidein's directory: it records its process in the marker, runs
// COMMAND (already quoted) under timeout so that it never outlives its
// lifetime, and records how it ended.
func wrapperScript(id string, lifetimeSec, graceSec int64, command string) string {
	return `#!/bin/sh
# pond glidein ` + id + `: runs its agent under its lifetime and records
# its process and its exit status in ` + markerFile + `.
[ -f ` + markerFile + ` ] || exit 1
if [ -f ` + envFile + ` ]; then . ./` + envFile + ` || exit 1; fi
{ read -r l < /proc/$$/stat; } 2>/dev/null || exit 1
r=${l##*) }
set -- $r
boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo -)
printf 'pid=%s\nstart=%s\nboot=%s\nstarted=%s\nsid=%s\n' "$$" "${20}" "$boot" "$(date +%s)" "$4" >> ` + markerFile + `
timeout -k ` + itoa(graceSec) + `s ` + itoa(lifetimeSec) + `s ` + command + `
status=$?
printf 'status=%s\nended=%s\n' "$status" "$(date +%s)" >> ` + markerFile + `
`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
