#!/usr/bin/env python3
"""The helpers of scripts/device-check.sh: packing, the carry limit, the environment probe,
step records and results.json. Standard library only (it runs on the GPU machine too).

    device_check.py pack ARCHIVE DIR NAME...      tar DIR/NAME... (xz, else gzip); prints the file
    device_check.py unpack ARCHIVE DEST           extract a tar of any compression
    device_check.py deb DEB DEST                  extract a .deb's files (ar + data.tar.*)
    device_check.py collect DEST                  copy the executables cargo's JSON messages
                                                  (stdin) name into DEST
    device_check.py carry --limit-mib N --pkg D [--also P]... [--dry]
                                                  what travels must fit: drops photos until it
                                                  does (--dry: only measures)
    device_check.py probe OUT --carried-lib DIR --cuda-home DIR
                                                  libraries, their versions, PTX ISA -> OUT/env/libraries.json
    device_check.py probe-python OUT              python, torch, torchvision -> OUT/env/python.json
    device_check.py start OUT --deadline S [--only STEPS] [--strict]   a fresh run.json
    device_check.py unzip-wheels TARGET WHEEL...  the wheels' files into TARGET (no pip there)
    device_check.py wheel-tags --python X.Y|this WHEEL...
                                                  the wheels install on CPython X.Y, x86-64
                                                  Linux (this: this python and its glibc)
    device_check.py set OUT KEY JSON              one field of run.json (text not JSON: a string)
    device_check.py bench-images OUT DIR WHY      the benchmark images (WHY: why they are a fallback)
    device_check.py record OUT --name N --rc RC ...     one line of steps.jsonl, then results.json
    device_check.py summarise OUT [--final]       results.json; --final: exit 1 when strict and
                                                  a step failed or was cut, or there was no GPU

OUT is the run's work folder. With STOKER_CHECK_PUBLISH=DIR, every update also copies
results.json and steps.jsonl into DIR and, after each step, packs the work folder into
DIR/results.tar.gz (under TAR_LIMIT bytes): DIR gets those flat files only.
"""
import argparse
import csv
import ctypes
import glob
import io
import json
import os
import re
import shutil
import signal
import sys
import tarfile
import time

# ---------------------------------------------------------------- packing


def pack(archive, root, names):
    """Writes ARCHIVE(.tar.xz, or .tar.gz where Python has no lzma); prints its name."""
    try:
        import lzma  # noqa: F401

        mode, ext = "w:xz", ".tar.xz"
    except ImportError:
        mode, ext = "w:gz", ".tar.gz"
    path = archive + ext
    with tarfile.open(path, mode) as tar:
        for n in names:
            tar.add(os.path.join(root, n), arcname=n)
    print(path)


def unpack(archive, dest):
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(archive, "r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def deb(path, dest):
    """A .deb is an ar archive; its files are in data.tar.{xz,gz,bz2} (zstd: not readable here)."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            sys.exit(f"{path}: not an ar archive")
        while True:
            head = f.read(60)
            if len(head) < 60:
                sys.exit(f"{path}: no data.tar member")
            name, size = head[:16].decode().strip().rstrip("/"), int(head[48:58])
            body = f.read(size)
            if size % 2:
                f.read(1)
            if name.startswith("data.tar"):
                os.makedirs(dest, exist_ok=True)
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                    if hasattr(tarfile, "data_filter"):
                        tar.extractall(dest, filter="data")
                    else:
                        tar.extractall(dest)
                return


def collect(dest):
    """Copies every binary and test executable that `cargo --message-format=json` built."""
    os.makedirs(dest, exist_ok=True)
    for line in sys.stdin:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        kind = (m.get("target") or {}).get("kind")
        if m.get("reason") == "compiler-artifact" and m.get("executable") and kind in (["bin"], ["test"]):
            shutil.copy(m["executable"], os.path.join(dest, m["target"]["name"]))
            print(f"  {m['target']['name']}")


# ---------------------------------------------------------------- the carry limit


def tree_bytes(path):
    """Bytes under PATH (links counted as links: they travel as links)."""
    if os.path.islink(path) or os.path.isfile(path):
        return os.lstat(path).st_size
    total = 0
    for d, _, files in os.walk(path):
        for n in files:
            total += os.lstat(os.path.join(d, n)).st_size
    return total


def working_tree_bytes():
    """Tracked files plus untracked ones git does not ignore: the working tree that travels."""
    import subprocess

    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    total = 0
    for name in set(out.decode().split("\0")):
        if name and os.path.lexists(name):
            total += os.lstat(name).st_size
    return total


def carry(limit_mib, pkg, also, dry=False):
    limit = limit_mib * 1024 * 1024
    mib = lambda b: f"{b / 1048576:.1f} MiB"  # noqa: E731
    tree = working_tree_bytes()
    parts = {p: tree_bytes(p) for p in [pkg] + also if os.path.lexists(p)}
    total = tree + sum(parts.values())
    photos = os.path.join(pkg, "photos")
    names = sorted(
        (os.path.join(photos, n) for n in (os.listdir(photos) if os.path.isdir(photos) else [])),
        key=os.path.getsize,
    )
    dropped = 0
    while total > limit and names and not dry:
        p = names.pop()  # the largest first: the fewest photos dropped
        total -= os.path.getsize(p)
        os.remove(p)
        dropped += 1
    if dropped:
        print(f"carry: dropped {dropped} of the photos (the largest) to stay under {limit_mib} MiB; "
              f"{len(names)} remain")
        parts = {p: tree_bytes(p) for p in parts}
    detail = ", ".join(f"{p} {mib(b)}" for p, b in parts.items())
    print(f"carry: {mib(total)} of {limit_mib} MiB (working tree {mib(tree)}, {detail})")
    if total > limit:
        sys.exit(f"error: {mib(total)} does not fit in {limit_mib} MiB even without photos")


# ---------------------------------------------------------------- the environment probe


def first_file(candidates):
    return next((p for p in candidates if p and os.path.isfile(p)), None)


def lib_dirs(carried, cuda_home):
    dirs = [carried] if carried else []
    if cuda_home:
        dirs += [os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib")]
    dirs += ["/usr/local/cuda/lib64"] + sorted(glob.glob("/usr/local/cuda-*/lib64"))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def probe_driver():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return {"error": f"libcuda.so.1 not loadable: {e}"}
    v = ctypes.c_int()
    rc = lib.cuDriverGetVersion(ctypes.byref(v))
    if rc != 0:
        return {"error": f"cuDriverGetVersion returned {rc}"}
    return {"cuda_driver_api": f"{v.value // 1000}.{v.value % 1000 // 10}"}


def probe_nvrtc(dirs):
    path = first_file(os.path.join(d, "libnvrtc.so.13") for d in dirs)
    if not path:
        return {"error": "libnvrtc.so.13 not found in " + ", ".join(dirs or ["(no CUDA folder)"])}
    out = {"path": path, "real_path": os.path.realpath(path)}
    builtins = os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.13.0")
    try:
        if os.path.isfile(builtins):
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)  # libnvrtc dlopens it by name
        lib = ctypes.CDLL(path)
    except OSError as e:
        return dict(out, error=f"not loadable: {e}")
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    out["version"] = f"{major.value}.{minor.value}"
    # A one-line kernel for compute_90: the PTX ISA version this NVRTC writes.
    src = b'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }'
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) != 0:
        return dict(out, error="nvrtcCreateProgram failed")
    opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_90")
    rc = lib.nvrtcCompileProgram(prog, 1, opts)
    if rc != 0:
        return dict(out, error=f"nvrtcCompileProgram returned {rc}")
    size = ctypes.c_size_t()
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    ptx = buf.value.decode(errors="replace")
    m = re.search(r"^\.version\s+(\S+)", ptx, re.M)
    t = re.search(r"^\.target\s+(\S+)", ptx, re.M)
    out["ptx_isa"] = m.group(1) if m else None
    out["ptx_target"] = t.group(1) if t else None
    return out


def probe_nvjpeg(dirs):
    path = first_file(os.path.join(d, "libnvjpeg.so.13") for d in dirs)
    if not path:
        return {"error": "libnvjpeg.so.13 not found in " + ", ".join(dirs or ["(no CUDA folder)"])}
    out = {"path": path}
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return dict(out, error=f"not loadable: {e}")
    parts = []
    for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        v = ctypes.c_int()
        if lib.nvjpegGetProperty(prop, ctypes.byref(v)) != 0:
            return dict(out, error="nvjpegGetProperty failed")
        parts.append(str(v.value))
    out["version"] = ".".join(parts)
    return out


def probe(out_dir, carried, cuda_home):
    env = os.path.join(out_dir, "env")
    os.makedirs(env, exist_ok=True)
    dirs = lib_dirs(carried, cuda_home)
    res = {"library_dirs": dirs}
    path = os.path.join(env, "libraries.json")

    def save():
        with open(path, "w") as f:
            json.dump(res, f, indent=1)

    # Each part is saved as soon as it is known: a crash in one keeps the others.
    for key, fn in [
        ("driver", probe_driver),
        ("nvrtc", lambda: probe_nvrtc(dirs)),
        ("nvjpeg", lambda: probe_nvjpeg(dirs)),
    ]:
        try:
            res[key] = fn()
        except Exception as e:  # a probe reports, it does not stop the check
            res[key] = {"error": f"{type(e).__name__}: {e}"}
        save()
    search = dirs + os.environ.get("PATH", "").split(os.pathsep) + ["/usr/local/cuda/bin"]
    res["compute_sanitizer"] = shutil.which("compute-sanitizer") or first_file(
        os.path.join(d, "compute-sanitizer") for d in search)
    res["ptxas"] = first_file(
        [os.path.join(cuda_home or "/usr/local/cuda", "bin", "ptxas"), shutil.which("ptxas")])
    res["vulkan_icds"] = sorted(
        glob.glob("/usr/share/vulkan/icd.d/*.json") + glob.glob("/etc/vulkan/icd.d/*.json")
        + glob.glob("/usr/local/nvidia/share/vulkan/icd.d/*.json"))
    res["system_libvulkan"] = sorted(
        glob.glob("/usr/lib/x86_64-linux-gnu/libvulkan.so.1") + glob.glob("/usr/lib/libvulkan.so.1"))
    save()
    def v(key, field):
        err = res[key].get("error", "")
        return res[key].get(field) or ("not loadable" if "not loadable" in err else "none")

    print(f"driver API {v('driver', 'cuda_driver_api')}, NVRTC {v('nvrtc', 'version')} "
          f"(PTX ISA {v('nvrtc', 'ptx_isa')}), nvJPEG {v('nvjpeg', 'version')}, "
          f"compute-sanitizer {'found' if res['compute_sanitizer'] else 'none'}")


def probe_python(out_dir):
    env = os.path.join(out_dir, "env")
    os.makedirs(env, exist_ok=True)
    g = glibc_version()
    res = {"python": sys.version.split()[0], "executable": sys.executable,
           "glibc": f"{g[0]}.{g[1]}" if g else None}
    try:
        import PIL

        res["pillow"] = PIL.__version__
    except Exception as e:
        res["pillow_error"] = f"{type(e).__name__}: {e}"
    try:
        import torch

        res["torch"] = torch.__version__
        res["torch_cuda"] = torch.version.cuda
        res["cuda_available"] = torch.cuda.is_available()
        if res["cuda_available"]:
            res["device"] = torch.cuda.get_device_name(0)
        import torchvision

        res["torchvision"] = torchvision.__version__
    except Exception as e:
        res["torch_error"] = f"{type(e).__name__}: {e}"
    with open(os.path.join(env, "python.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(f"python {res['python']}, torch {res.get('torch') or 'not importable'}, "
          f"torchvision {res.get('torchvision') or 'none'}, Pillow {res.get('pillow') or 'none'}")


# ---------------------------------------------------------------- step records


def tail_line(text, pattern=r"error|panicked|fatal|not found|cannot|failed"):
    """The last line that looks like the cause, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.search(pattern, ln, re.I):
            return ln[:240]
    return lines[-1][:240] if lines else "no output"


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def test_outcome(text, rc, filt):
    """libtest's output -> (status, reason)."""
    results = re.findall(
        r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured; "
        r"(\d+) filtered out", text)
    skipped = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("skipped:")]
    said = f"; {len(skipped)} said {skipped[0][:120]!r}" if skipped else ""
    if rc == 0 and results:
        _, passed, _, ignored, filtered = results[-1]
        if passed == "0":
            what = f"no test matches the filter {filt!r}" if filt else "no tests ran"
            return "skipped", f"{what}: nothing was checked"
        return "ok", f"{passed} passed, {ignored} ignored{said}"
    m = re.findall(r"\nfailures:\n((?:    \S+\n)+)", text)
    names = m[-1].split() if m else []
    if names:
        return "failed", f"{len(names)} failed: {', '.join(names)[:300]}"
    return None, None


def hung_tests(text):
    started, done = [], set()
    for m in re.finditer(r"^test (\S+) \.\.\. ?(ok|FAILED|ignored)?", text, re.M):
        (done.add if m.group(2) else started.append)(m.group(1))
    slow = re.findall(r"test (\S+) has been running for over", text)
    return [t for t in dict.fromkeys(started + slow) if t not in done]


def rates(j):
    """A report's rates in a few words: "cuda 1234 images/s, cpu 99 images/s"."""
    if not isinstance(j, dict):
        return ""
    rows = [(r.get("backend"), "unavailable" if r.get("error") else r.get("images_per_s"))
            for r in j.get("results", []) or [] if isinstance(r, dict)]
    rows += [(k, (j.get(k) or {}).get("images_per_s")) for k in ("decode", "train")
             if isinstance(j.get(k), dict)]
    return ", ".join(f"{k} {v:.0f} images/s" if isinstance(v, (int, float)) else f"{k} {v}"
                     for k, v in rows if v is not None)


def outcome(a):
    if a.rc == "null":
        reason = a.reason or "not run"
        return None, ("cut" if reason.startswith("cut") else "skipped"), reason
    rc = int(a.rc)
    text = ""
    if a.log and os.path.isfile(a.log):
        with open(a.log, errors="replace") as f:
            text = f.read()
    limit, cap = a.limit or 0, a.cap or 0
    if a.reason.startswith("abandoned"):
        hung = hung_tests(text) if a.kind in ("test", "sanitizer") else []
        return rc, "failed", a.reason + (f" in {', '.join(hung)[:200]}" if hung else "")
    if rc in (124, 137) and limit and limit >= 1:
        hung = hung_tests(text) if a.kind == "test" else []
        inside = f" in {', '.join(hung)[:200]}" if hung else ""
        if limit < cap:
            where = f" (the {a.phase} phase ends at {a.phase_end} s)" if a.phase else ""
            return rc, "cut", f"cut by the deadline after {limit} s{inside}{where}"
        return rc, "failed", f"timed out after {cap} s{inside}"
    if a.kind == "sanitizer":
        m = re.findall(r"ERROR SUMMARY: (\d+) errors?", text)
        status, reason = test_outcome(text, 0 if rc == 0 else rc, a.filter)
        if m and m[-1] != "0":
            return rc, "failed", f"{m[-1]} errors reported: {tail_line(text, r'=+ (Invalid|Race|Error|Program hit)')}"
        if status:
            return rc, status, f"{m[-1] if m else 'no'} sanitizer errors; {reason}"
    if a.kind == "test":
        status, reason = test_outcome(text, rc, a.filter)
        if status:
            return rc, status, (a.reason + ": " if a.reason else "") + reason
    if a.kind == "bench" and a.stdout and os.path.isfile(a.stdout):
        try:
            with open(a.stdout) as f:
                j = json.load(f)
            err = j.get("error") if isinstance(j, dict) else None
            if isinstance(err, dict):
                got = f"; {rates(j)}" if rates(j) else ""
                return rc, ("ok" if rc == 0 else "failed"), \
                    f"exit {rc}: {err.get('kind')}: {str(err.get('message'))[:200]}{got}"
            if rc == 0:
                return rc, "ok", "ok" + (f": {rates(j)}" if rates(j) else "")
        except (OSError, ValueError) as e:
            if rc == 0:
                return rc, "failed", f"exit 0 but stdout is not JSON: {e}"
    if rc == 0:
        if a.reason:
            return rc, "ok", a.reason
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return rc, "ok", f"ok: {lines[-1][:200]}" if lines else "ok"
    if rc > 128:
        why = f"killed by {signal_name(rc - 128)}"
    elif rc == 127:
        why = "command not found or a library missing"
    else:
        why = f"exit {rc}"
    return rc, "failed", f"{why}: {tail_line(text)}"


def record(a):
    rc, status, reason = outcome(a)
    line = {"step": a.name, "rc": rc, "seconds": round(a.ms / 1000, 2), "reason": reason,
            "status": status, "phase": a.phase or None, "limit_s": a.limit or None}
    if a.log:
        line["log"] = os.path.relpath(a.log, a.out)
    with open(os.path.join(a.out, "steps.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
    print(f"   {a.name}: {status} ({line['seconds']} s): {reason}")
    set_field(a.out, "running", "null", tar=True)  # and results.json, the archive


# ---------------------------------------------------------------- results.json


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


def rate(j, backend, key="images_per_s"):
    if not isinstance(j, dict):
        return None
    for r in j.get("results", []) or []:
        if isinstance(r, dict) and r.get("backend") == backend:
            return None if r.get("error") else r.get(key)  # error: the backend did not run
    return None


def gpu_info(out):
    info = {}
    p = os.path.join(out, "gpu.csv")
    if os.path.isfile(p):
        with open(p) as f:
            rows = list(csv.reader(f, skipinitialspace=True))
        if len(rows) >= 2:
            keys = [re.sub(r"\s*\[.*\]", "", k).strip() for k in rows[0]]
            info["gpus"] = [dict(zip(keys, r)) for r in rows[1:] if r]
    q = os.path.join(out, "nvidia-smi-q.txt")
    if os.path.isfile(q):
        with open(q, errors="replace") as f:
            text = f.read()
        for key, pat in [("driver_version", r"Driver Version\s*:\s*(\S+)"),
                         ("cuda_version", r"CUDA Version\s*:\s*(\S+)")]:
            m = re.search(pat, text)
            if m:
                info[key] = m.group(1)
    return info


def from_logs(out):
    """Versions the test executables print (nvjpeg_load: "nvJPEG 13.0.x")."""
    found = {}
    for p in sorted(glob.glob(os.path.join(out, "logs", "*.log"))):
        with open(p, errors="replace") as f:
            text = f.read()
        for key, pat in [("nvjpeg", r"nvJPEG (\d+\.\d+\.\d+)"), ("ptx_isa", r"^\.version (\d+\.\d+)"),
                         ("nvrtc", r"NVRTC (\d+\.\d+)")]:
            m = re.search(pat, text, re.M)
            if m and key not in found:
                found[key] = m.group(1)
    return found


def summarise(out, final=False, tar=False):
    run = load_json(os.path.join(out, "run.json"))
    steps = []
    p = os.path.join(out, "steps.jsonl")
    if os.path.isfile(p):
        with open(p) as f:
            for ln in f:
                try:
                    steps.append(json.loads(ln))
                except ValueError:
                    pass
    env = {os.path.splitext(os.path.basename(q))[0]: load_json(q)
           for q in sorted(glob.glob(os.path.join(out, "env", "*.json")))}
    env["gpu"] = gpu_info(out)
    figures = {os.path.splitext(os.path.basename(q))[0]: load_json(q)
               for q in sorted(glob.glob(os.path.join(out, "figures", "*.json")))}
    bench = {os.path.splitext(os.path.basename(q))[0]: load_json(q)
             for q in sorted(glob.glob(os.path.join(out, "bench", "*.json")))}
    libs = env.get("libraries", {})
    logs = from_logs(out)
    versions = {
        "driver": env["gpu"].get("driver_version"),
        "cuda_driver_api": (libs.get("driver") or {}).get("cuda_driver_api")
        or env["gpu"].get("cuda_version"),
        "nvrtc": (libs.get("nvrtc") or {}).get("version") or logs.get("nvrtc"),
        "ptx_isa": (libs.get("nvrtc") or {}).get("ptx_isa") or logs.get("ptx_isa"),
        "nvjpeg": (libs.get("nvjpeg") or {}).get("version") or logs.get("nvjpeg"),
        "nvjpeg_reported_by_tests": logs.get("nvjpeg"),
        "glibc": (env.get("python") or {}).get("glibc"),
    }
    last = {}
    for s in steps:
        last[s.get("step")] = s  # a step recorded twice: the later line counts
    by = lambda st: [n for n, s in last.items() if s.get("status") == st]  # noqa: E731
    tv = bench.get("torchvision", {}) if isinstance(bench.get("torchvision"), dict) else {}
    dec = rate(bench.get("bench_decode"), "cuda")
    rst_e, rst_h = bench.get("bench_decode_rst_engines"), bench.get("bench_decode_rst_device_huffman")
    summary = {
        "cuda_decode_images_per_s": dec,
        "cpu_decode_images_per_s": rate(bench.get("bench_decode"), "cpu"),
        "torchvision_decode_images_per_s": (tv.get("decode") or {}).get("images_per_s"),
        "torchvision_train_images_per_s": (tv.get("train") or {}).get("images_per_s"),
        "restart_marked_engines_images_per_s": rate(rst_e, "cuda"),
        "restart_marked_device_huffman_images_per_s": rate(rst_h, "cuda"),
        "restart_marked_device_huffman_host_us_per_image": rate(rst_h, "cuda", "host_us_per_image"),
        "cuda_pipeline_images_per_s": rate(bench.get("bench_pipeline"), "cuda"),
        "cpu_pipeline_images_per_s": rate(bench.get("bench_pipeline"), "cpu"),
        "cuda_pipeline_shards_images_per_s": rate(bench.get("bench_pipeline_shards"), "cuda"),
        "cuda_pipeline_shards_share_half_images_per_s": rate(bench.get("bench_share_half"), "cuda"),
        "cuda_pipeline_shards_share_none_images_per_s": rate(bench.get("bench_share_none"), "cuda"),
    }
    if dec and summary["torchvision_decode_images_per_s"]:
        summary["decode_ratio_vs_torchvision"] = dec / summary["torchvision_decode_images_per_s"]
    started = run.get("started_unix")
    res = {
        "complete": final,
        "started": run.get("started"),
        "elapsed_s": round(time.time() - started, 1) if started else None,
        "deadline_s": run.get("deadline_s"),
        "strict": run.get("strict", False),
        "only": run.get("only"),
        "gpu": run.get("gpu"),
        "no_gpu_reason": run.get("no_gpu_reason"),
        "bench_images": run.get("bench_images"),
        "running": run.get("running"),
        "failed_steps": by("failed"),
        "cut_steps": by("cut"),
        "skipped_steps": by("skipped"),
        "ok_steps": by("ok"),
        "steps": steps,
        "versions": versions,
        "environment": env,
        "summary": summary,
        "benchmarks": bench,
        "figures": figures,
    }
    tmp = os.path.join(out, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, os.path.join(out, "results.json"))
    publish(out, tar or final)
    if final:
        print(json.dumps({"summary": summary, "versions": versions, "failed_steps": res["failed_steps"],
                          "cut_steps": res["cut_steps"]}, indent=1))
        if res["strict"] and (res["failed_steps"] or res["cut_steps"] or not res["gpu"]):
            return 1
    return 0


# ---------------------------------------------------------------- what comes back

# The archive stays under this (what comes back is at most 16 MiB a file).
TAR_LIMIT = 15 * 1024 * 1024


def pack_results(out, dest):
    """DEST/results.tar.gz: the work folder OUT, the largest files left out (and named in
    left-out.txt) until it fits TAR_LIMIT."""
    files = []
    for d, _, names in os.walk(out):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p) and not n.endswith(".tmp"):
                files.append(p)
    files.sort(key=lambda p: os.path.getsize(p))
    left = []
    tmp = os.path.join(dest, "results.tar.gz.tmp")
    while True:
        with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
            for p in files:
                try:
                    tar.add(p, arcname=os.path.join("results", os.path.relpath(p, out)))
                except OSError:
                    pass  # gone since listed
            if left:
                text = "".join(f"{os.path.relpath(p, out)} {os.path.getsize(p)} bytes\n" for p in left)
                info = tarfile.TarInfo("results/left-out.txt")
                info.size = len(text.encode())
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(text.encode()))
        if os.path.getsize(tmp) <= TAR_LIMIT or not files:
            break
        # Leave out the largest quarter of what is left over the limit, at least one file.
        over = os.path.getsize(tmp) - TAR_LIMIT
        while files and over > 0:
            p = files.pop()
            left.append(p)
            over -= os.path.getsize(p) // 2
    os.replace(tmp, os.path.join(dest, "results.tar.gz"))


def publish(out, tar):
    """Copies results.json and steps.jsonl to $STOKER_CHECK_PUBLISH; with TAR, the archive."""
    dest = os.environ.get("STOKER_CHECK_PUBLISH")
    if not dest or os.path.abspath(dest) == os.path.abspath(out):
        return
    for name in ("results.json", "steps.jsonl"):
        src = os.path.join(out, name)
        if os.path.isfile(src):
            tmp = os.path.join(dest, name + ".tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, os.path.join(dest, name))
    if tar:
        pack_results(out, dest)


def glibc_version():
    try:
        v = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        v = ""
    m = re.match(r"glibc (\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else None


def wheel_accepts(name, python, glibc=None, machine="x86_64"):
    """Why the wheel file NAME does not install on CPython PYTHON ((3, 12)), Linux on
    MACHINE with GLIBC ((2, 39), None: any), or None when it does."""
    base = os.path.basename(name)
    if not base.endswith(".whl"):
        return f"{base}: not a wheel"
    parts = base[:-4].split("-")
    if len(parts) not in (5, 6):
        return f"{base}: not a wheel name (NAME-VERSION-PY-ABI-PLATFORM.whl)"
    pys, abis, plats = (parts[-3].split("."), parts[-2].split("."), parts[-1].split("."))
    ok_py = False
    for py in pys:
        m = re.fullmatch(r"(cp|py)(\d)(\d+)?", py)
        if not m:
            continue
        major, minor = int(m.group(2)), int(m.group(3) or 0)
        if major != python[0]:
            continue
        if m.group(1) == "py" and "none" in abis:
            ok_py = True  # pure Python
        elif m.group(1) == "cp" and "abi3" in abis and minor <= python[1]:
            ok_py = True  # the stable ABI of this or an older CPython
        elif m.group(1) == "cp" and minor == python[1] and f"cp{major}{minor}" in abis:
            ok_py = True
    if not ok_py:
        return (f"{base}: tags {parts[-3]}-{parts[-2]} do not accept CPython "
                f"{python[0]}.{python[1]} (abi3 of an older or equal version would)")
    for plat in plats:
        if plat == "any":
            return None
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", plat)
        legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
        if m:
            need, arch = (int(m.group(1)), int(m.group(2))), m.group(3)
        else:
            m = re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014)_(\w+)", plat)
            if not m:
                continue
            need, arch = legacy[m.group(1)], m.group(2)
        if arch == machine and (glibc is None or need <= glibc):
            return None
    return (f"{base}: platform {parts[-1]} is not a manylinux tag for {machine}"
            + (f" with glibc {glibc[0]}.{glibc[1]}" if glibc else ""))


def unzip_wheels(target, wheels):
    """Where python3 has no pip: each wheel's files unzipped into TARGET (what pip
    --target does for wheels without scripts or data)."""
    import zipfile

    os.makedirs(target, exist_ok=True)
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            for n in z.namelist():
                if n.startswith("/") or ".." in n.split("/"):
                    sys.exit(f"error: {w}: unsafe member {n}")
            z.extractall(target)
        print(f"unzipped {os.path.basename(w)}")


def wheel_tags(python, wheels):
    if python == "this":
        py, glibc = sys.version_info[:2], glibc_version()
    else:
        py, glibc = tuple(int(x) for x in python.split(".")[:2]), None
    stoker = [w for w in wheels if os.path.basename(w).startswith("stoker-")]
    if not stoker:
        sys.exit("error: no stoker-*.whl given")
    bad = [why for w in wheels if (why := wheel_accepts(w, py, glibc))]
    where = f"CPython {py[0]}.{py[1]}" + (f", glibc {glibc[0]}.{glibc[1]}" if glibc else "")
    if bad:
        sys.exit("error: " + "; ".join(bad))
    print(f"wheels accepted by {where} on x86-64 Linux: " + ", ".join(os.path.basename(w) for w in wheels))


def start(out, deadline, strict, only=""):
    run = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "started_unix": time.time(), "deadline_s": deadline, "strict": strict,
           "only": [s for s in only.split(",") if s] or None}
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(run, f, indent=1)
    summarise(out, tar=True)


def set_field(out, key, value, tar=False):
    """One field of run.json: VALUE is JSON; text that is not JSON is kept as a string."""
    p = os.path.join(out, "run.json")
    run = load_json(p)
    try:
        run[key] = json.loads(value)
    except ValueError:
        run[key] = value
    with open(p, "w") as f:
        json.dump(run, f, indent=1)
    summarise(out, tar=tar)


def bench_images(out, path, fallback):
    jpegs = sum(1 for d, _, names in os.walk(path) for n in names
                if n.lower().endswith((".jpg", ".jpeg")))
    set_field(out, "bench_images", json.dumps({"path": path, "jpegs": jpegs, "fallback": fallback or None}))
    print(f"   benchmark images: {path} ({jpegs} JPEGs)" + (f"; fell back: {fallback}" if fallback else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("pack")
    s.add_argument("archive")
    s.add_argument("root")
    s.add_argument("names", nargs="+")
    s = sub.add_parser("unpack")
    s.add_argument("archive")
    s.add_argument("dest")
    s = sub.add_parser("deb")
    s.add_argument("deb")
    s.add_argument("dest")
    s = sub.add_parser("collect")
    s.add_argument("dest")
    s = sub.add_parser("carry")
    s.add_argument("--limit-mib", type=int, required=True)
    s.add_argument("--pkg", required=True)
    s.add_argument("--also", action="append", default=[])
    s.add_argument("--dry", action="store_true", help="only measure: drop no photos")
    s = sub.add_parser("probe")
    s.add_argument("out")
    s.add_argument("--carried-lib", default="")
    s.add_argument("--cuda-home", default="")
    s = sub.add_parser("probe-python")
    s.add_argument("out")
    s = sub.add_parser("start")
    s.add_argument("out")
    s.add_argument("--deadline", type=int, required=True)
    s.add_argument("--only", default="")
    s.add_argument("--strict", action="store_true")
    s = sub.add_parser("unzip-wheels")
    s.add_argument("target")
    s.add_argument("wheels", nargs="+")
    s = sub.add_parser("wheel-tags")
    s.add_argument("--python", required=True, help="X.Y, or this (this python and its glibc)")
    s.add_argument("wheels", nargs="+")
    s = sub.add_parser("set")
    s.add_argument("out")
    s.add_argument("key")
    s.add_argument("value")
    s = sub.add_parser("bench-images")
    s.add_argument("out")
    s.add_argument("path")
    s.add_argument("fallback")
    s = sub.add_parser("record")
    s.add_argument("out")
    s.add_argument("--name", required=True)
    s.add_argument("--rc", required=True, help="the exit status, or null for a step not run")
    s.add_argument("--ms", type=int, default=0)
    s.add_argument("--limit", type=int, default=0)
    s.add_argument("--cap", type=int, default=0)
    s.add_argument("--phase", default="")
    s.add_argument("--phase-end", type=int, default=0, help="seconds from the start")
    s.add_argument("--kind", default="cmd", choices=["cmd", "test", "bench", "sanitizer"])
    s.add_argument("--filter", default="")
    s.add_argument("--log", default="")
    s.add_argument("--stdout", default="")
    s.add_argument("--reason", default="")
    s = sub.add_parser("summarise")
    s.add_argument("out")
    s.add_argument("--final", action="store_true")
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.archive, a.root, a.names)
    elif a.cmd == "unpack":
        unpack(a.archive, a.dest)
    elif a.cmd == "deb":
        deb(a.deb, a.dest)
    elif a.cmd == "collect":
        collect(a.dest)
    elif a.cmd == "carry":
        carry(a.limit_mib, a.pkg, a.also, a.dry)
    elif a.cmd == "probe":
        probe(a.out, a.carried_lib, a.cuda_home)
    elif a.cmd == "probe-python":
        probe_python(a.out)
    elif a.cmd == "start":
        start(a.out, a.deadline, a.strict, a.only)
    elif a.cmd == "unzip-wheels":
        unzip_wheels(a.target, a.wheels)
    elif a.cmd == "wheel-tags":
        wheel_tags(a.python, a.wheels)
    elif a.cmd == "set":
        set_field(a.out, a.key, a.value)
    elif a.cmd == "bench-images":
        bench_images(a.out, a.path, a.fallback)
    elif a.cmd == "record":
        record(a)
    elif a.cmd == "summarise":
        sys.exit(summarise(a.out, final=a.final))


if __name__ == "__main__":
    main()
