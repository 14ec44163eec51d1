#!/bin/bash
# The nightly's systemd units (.ci/fscrypt-lab-nightly@.service and .timer)
# as systemd itself reads them: systemd-analyze verify of an instance for
# this clone, the timer's calendar, and that the service runs this clone's
# .ci/nightly with the history and log directories the README's cron line
# uses. Skips (77) without systemd-analyze.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inst=$(systemd-escape --path "$top")
cp "$top/.ci/fscrypt-lab-nightly@.service" "$tmp/fscrypt-lab-nightly@$inst.service"
cp "$top/.ci/fscrypt-lab-nightly@.timer" "$tmp/fscrypt-lab-nightly@$inst.timer"
if out=$(cd "$tmp" && systemd-analyze verify --man=no "./fscrypt-lab-nightly@$inst.service" \
	"./fscrypt-lab-nightly@$inst.timer" 2>&1) && [ -z "$out" ]; then
	ok "systemd-analyze verify: service and timer of $top"
else
	bad "systemd-analyze verify: $out"
fi
# the control: a unit whose ExecStart does not exist must not verify
sed "s|^ExecStart=.*|ExecStart=/%I/.ci/no-such-script|" "$top/.ci/fscrypt-lab-nightly@.service" \
	>"$tmp/fscrypt-lab-nightly@$inst-broken.service"
if (cd "$tmp" && systemd-analyze verify --man=no "./fscrypt-lab-nightly@$inst-broken.service") >/dev/null 2>&1; then
	bad "control: a service with a missing ExecStart verifies"
else
	ok "control: a service with a missing ExecStart does not verify"
fi
cal=$(sed -n 's/^OnCalendar=//p' "$top/.ci/fscrypt-lab-nightly@.timer")
if systemd-analyze calendar "$cal" >/dev/null 2>&1; then ok "timer: OnCalendar=$cal"; else bad "timer: bad OnCalendar '$cal'"; fi
for want in "ExecStart=/%I/.ci/nightly" "WorkingDirectory=/%I" \
	"Environment=LAB_HISTORY_DIR=/var/lib/fscrypt-lab/history" \
	"Environment=LAB_NIGHTLY_LOG_DIR=/var/log/fscrypt-lab"; do
	if grep -qxF "$want" "$top/.ci/fscrypt-lab-nightly@.service"; then ok "service: $want"; else bad "service: no line $want"; fi
done
if grep -q 'LAB_HISTORY_DIR=/var/lib/fscrypt-lab/history LAB_NIGHTLY_LOG_DIR=/var/log/fscrypt-lab .*\.ci/nightly' "$top/README.md"; then
	ok "README: the cron line uses the same directories"
else
	bad "README: no cron line running .ci/nightly with the units' directories"
fi

if [ "$fails" = 0 ]; then echo "ci-units: all passed"; else echo "ci-units: $fails failed"; exit 1; fi
