#!/usr/bin/env bash
# The prepared device check on a GPU host (benchmarks/gpu/device_check.py says what it measures).
#
#   benchmarks/gpu/run.sh [--cpu] [device_check.py options]
#
# On a host that reaches PyPI: `python -m pip install -e .[gpu]` (onnxruntime-gpu in place of
# onnxruntime) and run benchmarks/gpu/device_check.py yourself. This script is for a host that
# reaches nothing (the device machine this project is lent): it installs rtaudit[gpu] from wheels
# staged beforehand by benchmarks/gpu/stage_wheels.sh and carried in parts to $STAGE/parts
# (default /tmp/rtaudit-stage; the parts are one byte stream of the wheels in
# $STAGE/wheels.manifest's order, each wheel checked against its sha256), into a virtual
# environment that sees the host's own torch, numpy and CUDA libraries (a .pth file),
# builds the MiniLM encoder graphs there, and runs the check. --cpu: the dry run, in the
# current environment (no install), as tests/unit/test_device_check.py runs it.
#
# Writes device_check.md (the table), device_check.json (raw), run.log and the fleet logs to
# $OUT (default .rtaudit/device-check). Exit status: the check's (1 when a model ran silently on CPU).
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${OUT:-$repo/.rtaudit/device-check}"
mkdir -p "$OUT"
work="$(mktemp -d "${TMPDIR:-/tmp}/rtaudit-device-check.XXXXXX")"
started=$SECONDS
say() { echo "[device-check +$((SECONDS - started))s] $*" | tee -a "$OUT/run.log" >&2; }

if [ "${1:-}" = "--cpu" ]; then
    python3 "$repo/benchmarks/gpu/device_check.py" --out "$work" "$@"
    rc=$?
    cp "$work"/device_check.md "$work"/device_check.json "$OUT"/ 2>/dev/null
    exit $rc
fi

STAGE="${STAGE:-/tmp/rtaudit-stage}"
venv="${VENV:-/tmp/rtaudit-venv}"
if [ ! -x "$venv/bin/rtaudit" ]; then
    [ -f "$STAGE/wheels.manifest" ] || { say "no $STAGE/wheels.manifest: stage the wheels first (benchmarks/gpu/stage_wheels.sh)"; exit 2; }
    say "reassembling $(wc -l < "$STAGE/wheels.manifest") wheels from $(ls "$STAGE/parts" | wc -l) parts"
    mkdir -p "$work/wheels"
    cat "$STAGE"/parts/* | python3 -c '
import hashlib, sys
out = sys.argv[1]
stream = sys.stdin.buffer
for line in open(sys.argv[2]):
    sha, size, name = line.split()
    data = stream.read(int(size))
    if len(data) != int(size) or hashlib.sha256(data).hexdigest() != sha:
        sys.exit(f"{name}: truncated or corrupt part stream ({len(data)} of {size} bytes)")
    open(f"{out}/{name}", "wb").write(data)
if stream.read(1):
    sys.exit("bytes left over after the last wheel: parts out of order?")
' "$work/wheels" "$STAGE/wheels.manifest" || { say "reassembly failed"; exit 2; }
    say "installing into $venv"
    # the host's python3 is itself a virtual environment (its torch, numpy, CUDA libraries): a venv made from it
    # would not see them, so a bare venv (no pip) gets the wheels and a .pth file naming the host's packages,
    # after its own (onnxruntime-gpu shadows the host's CPU onnxruntime)
    host_site="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    python3 -m venv --without-pip "$venv" || exit 2
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$host_site" > "$site/zz-host-image.pth"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$work"/wheels/*.whl || { say "wheel install failed"; exit 2; }
    # rtaudit itself as its editable install maps it (pyproject.toml: rtaudit.<folder> = <folder>)
    mkdir -p "$site/rtaudit"
    for d in engine workers schemas topics; do ln -sfn "$repo/$d" "$site/rtaudit/$d"; done
    printf '#!%s\nimport sys\nfrom faust.cli.faust import cli\nsys.exit(cli())\n' "$venv/bin/python" > "$venv/bin/faust"
    printf '#!%s\nimport sys\nfrom rtaudit.cli.main import app\nsys.argv[0] = "rtaudit"\nsys.exit(app())\n' "$venv/bin/python" > "$venv/bin/rtaudit"
    chmod +x "$venv/bin/faust" "$venv/bin/rtaudit"
    "$venv/bin/rtaudit" --help >/dev/null || { say "rtaudit does not start in $venv"; exit 2; }
fi
export PATH="$venv/bin:$PATH" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# onnxruntime-gpu loads cuBLAS/cuDNN/cuFFT/... by name: point the loader at the CUDA 13 libraries
# the host ships as Python packages (nvidia-*), for this process and every worker it starts
nv="$("$venv/bin/python" - <<'EOF'
import glob, os, site
dirs = set()
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    dirs.update(os.path.dirname(p) for p in glob.glob(os.path.join(sp, "nvidia", "**", "lib*.so*"), recursive=True))
print(":".join(sorted(dirs)))
EOF
)"
export LD_LIBRARY_PATH="${nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "onnxruntime $("$venv/bin/python" -c 'import onnxruntime as o; print(o.__version__, o.get_available_providers())')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$OUT/run.log" >&2
say "building the encoder graphs (fp32 export, int8, fp16)"
rtaudit text build-encoder >>"$OUT/run.log" 2>&1 || say "build-encoder failed (see run.log)"
say "running the check"
"$venv/bin/python" "$repo/benchmarks/gpu/device_check.py" --out "$work" "$@" 2>>"$OUT/run.log"
rc=$?
cp "$work"/device_check.md "$work"/device_check.json "$OUT"/ 2>/dev/null
for f in "$work"/fleet-*.log; do [ -f "$f" ] && cp "$f" "$OUT"/; done
say "done, exit $rc"
exit $rc
