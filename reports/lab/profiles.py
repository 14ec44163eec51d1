"""Parsers of the profiled repetition: bpftrace -f json, /proc/slabinfo,
perf script (folded by reports.lab.flame), and the key-object memory
analysis. No plotting here.
"""

import gzip
import json
import os
import re

from reports.lab import flame as F


def parse_bpftrace(path):
    """bpftrace -f json lines -> {"maps": {...}, "hists": {name: buckets},
    "probes": attached probes or None}.

    Keyed histograms become "name[key]". Non-JSON lines and other record
    types are skipped. Later records of one name replace earlier ones.
    """
    maps, hists, probes = {}, {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            data = rec.get("data") if isinstance(rec, dict) else None
            if not isinstance(data, dict):
                continue
            if rec.get("type") == "attached_probes":
                probes = data.get("probes")
                continue
            for name, val in data.items():
                if rec.get("type") == "map":
                    maps[name] = val
                elif rec.get("type") == "hist":
                    if isinstance(val, list):
                        hists[name] = val
                    elif isinstance(val, dict):
                        for k, b in val.items():
                            if isinstance(b, list):
                                hists[f"{name}[{k}]"] = b
    return {"maps": maps, "hists": hists, "probes": probes}


def hist_total(buckets):
    """Total count of a bpftrace histogram."""
    return sum(int(b.get("count", 0)) for b in buckets)


def derivation_count(bt):
    """Key derivations seen by bpftrace: a 'derive' count map, else hist."""
    for name, val in bt["maps"].items():
        if "derive" in name:
            if isinstance(val, dict):
                return sum(v for v in val.values()
                           if isinstance(v, (int, float)))
            if isinstance(val, (int, float)):
                return val
    for name, b in bt["hists"].items():
        if "derive" in name:
            return hist_total(b)
    return None


def parse_slabinfo(path):
    """/proc/slabinfo -> {cache: {active_objs, num_objs, objsize, bytes}}."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("#", "slabinfo")):
                continue
            parts = line.split()
            if len(parts) < 4:
                continue
            try:
                active, num, size = (int(x) for x in parts[1:4])
            except ValueError:
                continue
            out[parts[0]] = {"active_objs": active, "num_objs": num,
                             "objsize": size, "bytes": num * size}
    return out


PROFILE_KINDS = (("bpftrace.json", "bpftrace"), ("slab.txt", "slab"),
                 ("perf-stat.txt", "perf stat"),
                 ("perf-script.txt.gz", "perf script -g"),
                 ("counts.tsv", "event counts (tracefs)"))


def parse_counts(path):
    """counts.tsv of the count passes (bench/guest/lib.sh trace_counts:
    "phase<TAB>counter<TAB>value" lines) -> {phase: {counter: int}}, phases
    in file order. Lines of another shape are skipped."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
                continue
            out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return out


def _map_total(val):
    """A bpftrace count map's total: a scalar, or the sum of a keyed map."""
    if isinstance(val, (int, float)):
        return val
    if isinstance(val, dict):
        return sum(v for v in val.values() if isinstance(v, (int, float)))
    return None


def key_work(bt):
    """What the key machinery did in the profiled phase, from bench.bt's
    maps: extent lookups (and those that derived), extent keys derived or
    found cached, HKDF derivations (all, and of extent keys: context 9),
    key-slot programs and evictions, key-group starts per reason. A map
    bpftrace did not print (no event) counts 0; None when bpftrace neither
    attached its probes nor printed a map (it did not run)."""
    maps = bt.get("maps") or {}
    if not maps and not bt.get("probes"):
        return None

    def get(name, key=None):
        v = maps.get(name)
        if key is not None:
            v = v.get(key) if isinstance(v, dict) else None
        t = _map_total(v)
        return 0 if t is None else t

    starts = maps.get("@group_starts")
    # The map was @extent_info_setup (fscrypt_extent_info_setup) in runs
    # on the 6.1 series.
    setups = ("@extent_key_setup" if "@extent_key_setup" in maps
              else "@extent_info_setup")
    return {
        "lookups": get("@lookups"),
        "lookups_derived": get("@lookup_key", "derived"),
        "key_setups_derived": get(setups, "derived"),
        "key_setups_cached": get(setups, "cached"),
        "derivations": get("@derive_by_context"),
        "derivations_context_9": get("@derive_by_context", "9"),
        "slot_programs": get("@slot_programs"),
        "slot_evicts": get("@slot_evicts"),
        "group_starts": get("@group_starts"),
        "group_starts_by_reason": (dict(sorted(starts.items()))
                                   if isinstance(starts, dict) else {}),
    }


def load_folded(d):
    """Folded stacks of a profile directory: perf.folded if the run has
    one, else folded here from perf-script.txt.gz (or .txt); None if
    neither exists."""
    path = os.path.join(d, "perf.folded")
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return F.read_folded(f)
    for name, opener in (("perf-script.txt.gz", gzip.open),
                         ("perf-script.txt", open)):
        path = os.path.join(d, name)
        if os.path.exists(path):
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                return F.fold_perf_script(f)
    return None


def load_profiles(run):
    """What profiles/ holds, per arm, parsed where we can."""
    pdir = os.path.join(run.dir, "profiles")
    if not os.path.isdir(pdir):
        return None
    out = {}
    for arm in run.ordered((n for n in os.listdir(pdir)
                              if os.path.isdir(os.path.join(pdir, n)))):
        d = os.path.join(pdir, arm)
        entry = {"files": sorted(os.listdir(d))}
        try:
            if os.path.exists(os.path.join(d, "bpftrace.json")):
                entry["bpftrace"] = parse_bpftrace(
                    os.path.join(d, "bpftrace.json"))
            if os.path.exists(os.path.join(d, "slab.txt")):
                entry["slab"] = parse_slabinfo(os.path.join(d, "slab.txt"))
            if os.path.exists(os.path.join(d, "slab-before.txt")):
                entry["slab_before"] = parse_slabinfo(
                    os.path.join(d, "slab-before.txt"))
            folded = load_folded(d)
            if folded is not None:
                entry["folded"] = folded
            if os.path.exists(os.path.join(d, "counts.tsv")):
                entry["counts"] = parse_counts(os.path.join(d, "counts.tsv"))
            if os.path.exists(os.path.join(d, "perf-stat.txt")):
                with open(os.path.join(d, "perf-stat.txt"),
                          encoding="utf-8", errors="replace") as f:
                    entry["perf_stat"] = f.read()
        except OSError as e:
            run.warnings.append(f"profiles/{arm}: {e}")
        out[arm] = entry
    return out


def slab_selection(slabs, limit=14):
    """Caches worth showing: fscrypt/crypto/key ones first, then fs ones."""
    names = {n for s in slabs.values() for n in s}
    top = max(1, max((v["bytes"] for s in slabs.values()
                      for v in s.values()), default=1))

    def rank(n):
        best = max(s.get(n, {}).get("bytes", 0) for s in slabs.values())
        pri = (0 if re.search(r"fscrypt", n) else
               1 if re.search(r"crypt|key", n) else
               2 if re.search(r"btrfs|ext4|extent|inode", n) else 3)
        return (pri, -best / top, n)

    return sorted(names, key=rank)[:limit]


# The slab caches of the key objects: per-extent infos (the per-extent
# key patch's KMEM_CACHE(fscrypt_extent_info); with key groups, 24 bytes
# per extent: its number and a reference to its key), the derived extent
# keys (the key-group patch's KMEM_CACHE(fscrypt_extent_key): one per key
# group, or per extent with one key per extent; absent on a kernel without
# key groups) and per-inode fscrypt infos. The bench boots with
# slab_nomerge, so each has its own line in /proc/slabinfo.
MEMORY_CACHES = ("fscrypt_extent_info", "fscrypt_extent_key", "fscrypt_info")


def profiled_extents(run, arm):
    """Extents of the file the profiled rep read (largest count checked)."""
    pe = run.profiled_extent_counts.get(arm) or {}
    vals = [v for v in pe.values() if isinstance(v, (int, float))]
    return max(vals) if vals else None


def memory_analysis(run, prof):
    """Per arm and cache: slab objects before and after the profiled read.

    bytes = active objects x object size; held = allocated objects x size
    (what the slab keeps); per_extent = (after - before) bytes / extents of
    the file read. Skipped arms and arms without a snapshot say so.
    """
    out = {}
    for arm in run.arms:
        if arm in run.not_measured:
            out[arm] = {"status": "skipped",
                        "reason": run.not_measured[arm]}
            continue
        e = (prof or {}).get(arm) or {}
        if "slab" not in e:
            out[arm] = {"status": "not collected"}
            continue
        ext = profiled_extents(run, arm)
        caches = {}
        for c in MEMORY_CACHES:
            after = e["slab"].get(c)
            if after is None:
                caches[c] = {"status": "absent",
                             "reason": "no such slab cache in this kernel"}
                continue
            before = (e.get("slab_before") or {}).get(c)
            size = after["objsize"]
            d = {"status": "measured", "objsize": size,
                 "active_after": after["active_objs"],
                 "num_after": after["num_objs"],
                 "bytes_after": after["active_objs"] * size,
                 "held_after": after["num_objs"] * size,
                 "active_before": before["active_objs"] if before else None}
            if before:
                delta = after["active_objs"] - before["active_objs"]
                d["delta_objs"] = delta
                d["delta_bytes"] = delta * size
                d["bytes_per_extent"] = (delta * size / ext
                                         if ext else None)
            caches[c] = d
        out[arm] = {"status": "measured", "extents": ext, "caches": caches}
    return out
