"""Folded stacks and flame graphs from `perf script` output, written here.

    fold_perf_script(lines) -> {"comm;outer;...;leaf": samples}
    flame_svg(folded, title, ...) -> SVG text
    diff_flame_svg(target, base, title, ...) -> SVG text
    frame_deltas(target, base) -> per-function share changes
    premium_by_category(target, base) -> extra samples per category

No third-party flame graph code: the folding follows perf script's text
format (one header line per sample, then one indented line per frame, leaf
first, then a blank line), and the SVG is plain rectangles and text.

Folded stack format (one per line, "stack count"): the process name first,
then the frames from the outermost caller to the leaf, ";"-separated;
consecutive repeats of one user-space frame (user code built without frame
pointers unwinds into long runs of one bogus frame) are kept once, kernel
frames (ORC-unwound, reliable; recursion is real) all;
symbol offsets ("+0x1e") are dropped so that samples at different
instructions of one function merge; kworker names lose their pool number
("kworker/u4:2-btrfs-endio" -> "kworker/-btrfs-endio"), since which worker
of a pool ran is noise. Unresolved frames are "[unknown]" or, when perf
knows the file, "[file name]".
"""

import html
import math
import re
import zlib

IDLE_COMMS = ("swapper",)

_FRAME = re.compile(r"^\s+([0-9a-fA-F]+)\s+(.*?)(?:\s+\(([^()]*)\))?\s*$")
_HEADER = re.compile(r"^(\S.*?)\s+(\d+)(?:/(\d+))?\s")


def _clean_comm(comm):
    comm = comm.strip()
    return re.sub(r"^kworker/[^-\s]*", "kworker/", comm)


def _clean_sym(sym, dso):
    sym = sym.strip()
    sym = re.sub(r"\+0x[0-9a-fA-F]+$", "", sym)
    if not sym or sym == "[unknown]":
        if dso and dso != "[unknown]":
            return "[" + dso.rsplit("/", 1)[-1] + "]"
        return "[unknown]"
    # ';' separates frames in the folded format, ' ' the count
    return sym.replace(";", ":").replace(" ", "_")


def fold_perf_script(lines):
    """Fold `perf script` text (an iterable of lines) into stack counts.

    Each sample counts once (perf samples at a fixed frequency, so counts
    are proportional to time). A sample without frames counts as
    "comm;[no stack]". Returns a dict {folded stack: count}.
    """
    out = {}
    comm, frames, in_sample = None, [], False

    def flush():
        if comm is None:
            return
        # user code without frame pointers unwinds into long runs of one
        # bogus frame: a run of one user-space name counts once (kernel
        # frames, which unwind reliably, are kept as they are)
        collapsed, last = [], None
        for name, kernel in reversed(frames):
            if not (name == last and not kernel):
                collapsed.append(name)
            last = name
        stack = [comm] + (collapsed or ["[no stack]"])
        key = ";".join(stack)
        out[key] = out.get(key, 0) + 1

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            if in_sample:
                flush()
            comm, frames, in_sample = None, [], False
            continue
        if line[0] in " \t":
            if in_sample:
                m = _FRAME.match(line)
                if m:
                    dso = m.group(3) or ""
                    frames.append((_clean_sym(m.group(2), dso),
                                   dso.startswith("[kernel")))
            continue
        if line.startswith("#"):
            continue
        # a header line; a previous sample without a blank line ends here
        if in_sample:
            flush()
        m = _HEADER.match(line)
        comm = _clean_comm(m.group(1) if m else line.split()[0])
        frames, in_sample = [], True
    if in_sample:
        flush()
    return out


def read_folded(lines):
    """Parse "stack count" lines back into a dict (counts of a stack add)."""
    out = {}
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        out[stack] = out.get(stack, 0) + int(count)
    return out


def format_folded(folded):
    """The folded text, sorted by stack, one "stack count" line each."""
    return "".join(f"{k} {v}\n" for k, v in sorted(folded.items()))


def split_idle(folded, idle=IDLE_COMMS):
    """(busy stacks, idle sample count): idle = stacks of the idle task."""
    busy, idle_n = {}, 0
    for k, v in folded.items():
        if k.split(";", 1)[0] in idle:
            idle_n += v
        else:
            busy[k] = v
    return busy, idle_n


# ------------------------------------------------------------------ tree

class Node:
    __slots__ = ("name", "total", "self_count", "children")

    def __init__(self, name):
        self.name = name
        self.total = 0
        self.self_count = 0
        self.children = {}


def build_tree(folded):
    """A call tree: each node's total = samples in it and below."""
    root = Node("all")
    for stack, n in folded.items():
        root.total += n
        node = root
        for name in stack.split(";"):
            node = node.children.setdefault(name, Node(name))
            node.total += n
        node.self_count += n
    return root


def _rects(root, width):
    """(depth, x, w, node, path) for every node, x and w in pixels."""
    if root.total == 0:
        return []
    scale = width / root.total
    out = []
    todo = [(root, 0, 0.0, ())]
    while todo:
        node, depth, x, path = todo.pop()
        out.append((depth, x, node.total * scale, node, path))
        cx = x
        for name in sorted(node.children):
            child = node.children[name]
            todo.append((child, depth + 1, cx, path + (name,)))
            cx += child.total * scale
    return out


def _warm(name):
    """A stable warm color for a function name (hash, not random)."""
    h = zlib.crc32(name.encode())
    r = 205 + h % 50
    g = 80 + (h >> 8) % 120
    b = 40 + (h >> 16) % 50
    return f"rgb({r},{g},{b})"


def _diff_color(delta, scale):
    """Red for a function that takes a larger share in the target, blue for
    a smaller one, white for no change; full color at |delta| >= scale."""
    if scale <= 0:
        return "rgb(250,250,250)"
    t = max(-1.0, min(1.0, delta / scale))
    v = int(250 - 200 * abs(t))
    return f"rgb(250,{v},{v})" if t > 0 else f"rgb({v},{v},250)"


def _svg(rects_spec, title, subtitle, width, height_per=16):
    """rects_spec: list of (depth, x, w, label, fill, tooltip); subtitle
    may have several lines. Frames narrower than 0.3 px are not drawn and
    do not make the graph taller."""
    rects_spec = [r for r in rects_spec if r[2] >= 0.3]
    depth_max = max((d for d, *_ in rects_spec), default=0)
    sub_lines = subtitle.split("\n") if subtitle else []
    top = 30 + 16 * len(sub_lines)
    height = top + (depth_max + 1) * height_per + 24
    out = [
        '<?xml version="1.0" standalone="no"?>',
        f'<svg version="1.1" width="{width + 20}" height="{height}" '
        f'viewBox="0 0 {width + 20} {height}" '
        'xmlns="http://www.w3.org/2000/svg" font-family="Verdana, sans-serif">',
        f'<rect x="0" y="0" width="{width + 20}" height="{height}" '
        'fill="#f8f8f8"/>',
        f'<text x="{(width + 20) / 2}" y="20" font-size="15" '
        f'text-anchor="middle">{html.escape(title)}</text>',
    ] + [
        f'<text x="{(width + 20) / 2}" y="{38 + 16 * i}" font-size="11" '
        f'fill="#444" text-anchor="middle">{html.escape(line)}</text>'
        for i, line in enumerate(sub_lines)
    ]
    char_w = 6.2
    for depth, x, w, label, fill, tip in rects_spec:
        # root at the bottom, callees above their callers
        y = height - 24 - (depth + 1) * height_per
        out.append(
            f'<g><title>{html.escape(tip)}</title>'
            f'<rect x="{10 + x:.2f}" y="{y}" width="{w:.2f}" '
            f'height="{height_per - 1}" fill="{fill}" rx="2" ry="2"/>')
        room = int((w - 4) / char_w)
        if room >= 3:
            text = label if len(label) <= room else label[:room - 2] + ".."
            out.append(f'<text x="{10 + x + 2:.2f}" y="{y + height_per - 4}" '
                       f'font-size="11">{html.escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def flame_svg(folded, title, subtitle="", width=1200):
    """A flame graph of folded stacks: width = share of samples."""
    root = build_tree(folded)
    total = root.total
    spec = []
    for depth, x, w, node, path in _rects(root, width):
        pct = 100.0 * node.total / total if total else 0
        label = node.name if depth else f"all ({total} samples)"
        tip = (f"{label}: {node.total} samples, {pct:.2f}%"
               + (f", {node.self_count} in itself" if node.self_count else ""))
        spec.append((depth, x, w, label,
                     "rgb(200,200,200)" if depth == 0 else _warm(node.name),
                     tip))
    if not total:
        subtitle = (subtitle + " " if subtitle else "") + "(no samples)"
    return _svg(spec, title, subtitle, width)


def _shares(folded):
    root = build_tree(folded)
    out = {}
    total = root.total or 1
    todo = [(root, ())]
    while todo:
        node, path = todo.pop()
        out[path] = node.total / total
        for name, child in node.children.items():
            todo.append((child, path + (name,)))
    return out


def diff_flame_svg(target, base, title, subtitle="", width=1200):
    """Differential flame graph: the target's flame graph (frame widths are
    the target's shares of samples), each frame colored by how its share
    changed from the base profile: red = larger share in the target, blue =
    smaller, white = same. Both profiles are normalised to their own total,
    so different run lengths compare. Frames only in the base do not show
    (frame_deltas lists them)."""
    st, sb = _shares(target), _shares(base)
    deltas = {p: st[p] - sb.get(p, 0.0) for p in st if p}
    scale = max((abs(d) for d in deltas.values()), default=0.0)
    root = build_tree(target)
    spec = []
    for depth, x, w, node, path in _rects(root, width):
        if depth == 0:
            spec.append((0, x, w, f"all ({root.total} samples)",
                         "rgb(200,200,200)", "all"))
            continue
        d = deltas.get(path, 0.0)
        tip = (f"{node.name}: {100 * st[path]:.2f}% of target samples, "
               f"{100 * sb.get(path, 0.0):.2f}% of base ({100 * d:+.2f} "
               "points)")
        spec.append((depth, x, w, node.name, _diff_color(d, scale), tip))
    sub = (subtitle + "\n" if subtitle else "") + \
        f"red: larger share of samples than in the base, blue: smaller " \
        f"(full color at {100 * scale:.1f} points); white: same"
    return _svg(spec, title, sub, width)


def frame_deltas(target, base):
    """Per function name: share of samples whose stack contains it
    ("inclusive") and in which it is the leaf ("self"), in the target and in
    the base, and the differences (target - base), as fractions.
    Returns a list of dicts sorted by |self delta|, then name."""

    def per_function(folded):
        total = sum(folded.values()) or 1
        incl, selfc = {}, {}
        for stack, n in folded.items():
            frames = stack.split(";")[1:]  # not the process name
            for name in set(frames):
                incl[name] = incl.get(name, 0) + n
            if frames:
                selfc[frames[-1]] = selfc.get(frames[-1], 0) + n
        return ({k: v / total for k, v in incl.items()},
                {k: v / total for k, v in selfc.items()})

    it, st = per_function(target)
    ib, sb = per_function(base)
    rows = []
    for name in set(it) | set(ib):
        rows.append({"function": name,
                     "self_target": st.get(name, 0.0),
                     "self_base": sb.get(name, 0.0),
                     "self_delta": st.get(name, 0.0) - sb.get(name, 0.0),
                     "incl_target": it.get(name, 0.0),
                     "incl_base": ib.get(name, 0.0),
                     "incl_delta": it.get(name, 0.0) - ib.get(name, 0.0)})
    rows.sort(key=lambda r: (-abs(r["self_delta"]), r["function"]))
    return rows


# What the per-extent premium of a read is made of, as categories of
# functions (name patterns): each busy sample counts for the innermost
# frame of its stack that matches one, from the leaf up, else for "other".
# The categories thus partition the samples, and their premiums add up to
# the whole. The order decides where a frame matching two would go.
PREMIUM_CATEGORIES = [
    ("per-extent info setup (context load, parse, alloc, free)",
     r"^(fscrypt_load_extent_info|btrfs_fscrypt_load_extent|"
     r"fscrypt_new_extent_info|fscrypt_put_extent_info|"
     r"fscrypt_get_extent_info|fscrypt_parse_extent_context|"
     r"fscrypt_check_extent_fields|btrfs_fscrypt_check_file_extent|"
     r"fscrypt_extent_parent_info)$"),
    ("extent key lookup at load (group hint, table, derivation)",
     r"^(fscrypt_extent_key_for_load|fscrypt_find_or_derive_extent_key|"
     r"fscrypt_extent_lookup_locked|fscrypt_get_extent_key|"
     r"fscrypt_put_extent_key|fscrypt_extent_key_is|"
     r"fscrypt_derive_extent_key|fscrypt_hkdf_expand|"
     r"fscrypt_other_master_key)$"),
    ("per-block key lookup at decryption (callback, checks, key slot)",
     r"^(fscrypt_lookup_extent|btrfs_fscrypt_get_extent_info|"
     r"btrfs_fscrypt_read_extent_info|fscrypt_crypt_extent_units|"
     r"fscrypt_crypt_extent_run|fscrypt_get_key_slot|fscrypt_put_key_slot|"
     r"fscrypt_find_key_slot|fscrypt_get_key_pool|"
     r"fscrypt_generate_extent_iv|btrfs_decrypt_read_range|"
     r"fscrypt_decrypt_extent_blocks|__fscrypt_crypt_units|"
     r"btrfs_fscrypt_read_bio_set|btrfs_fscrypt_read_bio_put|"
     r"btrfs_fscrypt_read_bio_matches)$"),
    ("AES", r"(aes|xts|gf128|skcipher)"),
    ("data checksums", r"(crc32c|crc_pcl|btrfs_check_data_csum|"
     r"btrfs_data_csum_ok|btrfs_lookup_bio_sums|btrfs_csum)"),
    ("extent maps and file extent lookup",
     r"^(btrfs_get_extent|get_extent_map|\w*search_extent_mapping|"
     r"\w*lookup_extent_mapping|btrfs_extent_item_to_extent_map|"
     r"btrfs_lookup_file_extent|\w*add_extent_mapping|\w*alloc_extent_map|"
     r"\w*free_extent_map|merge_extent_mapping|try_merge_map)$"),
    ("metadata b-tree (search, leaves)",
     r"^(btrfs_search_slot|btrfs_bin_search|read_extent_buffer|"
     r"btrfs_tree_read_\w+|read_block_for_search|btrfs_next_leaf|"
     r"btrfs_release_path|btrfs_get_\w+|find_extent_buffer|"
     r"btree_read_extent_buffer_pages|btrfs_validate_extent_buffer)$"),
    ("bios (build, submit, complete)",
     r"^(submit_extent_folio|submit_one_bio|alloc_new_bio|btrfs_submit_\w+|"
     r"btrfs_bio_alloc|end_bbio_data_read|btrfs_orig_bbio_end_io|"
     r"btrfs_simple_end_io|bio_add_folio|btrfs_end_bio_work|"
     r"btrfs_do_readpage|submit_bio_noacct|blk_mq_\w+|virtio_queue_rq|"
     r"bio_endio|blk_update_request|btrfs_map_block)$"),
    ("page cache, copy to user",
     r"^(filemap_\w+|copy_page_to_iter|_copy_to_iter|rep_movs_alternative|"
     r"page_cache_ra_unbounded|__filemap_add_folio|folio_mark_accessed|"
     r"clear_page_erms|next_uptodate_folio)$"),
    ("slab and page allocator",
     r"^(kmem_cache_\w+|__slab_free|___slab_alloc|kfree|__kmalloc\w*|"
     r"mempool_\w+|__alloc_pages\w*|free_unref_\w+|__rmqueue\w*)$"),
    ("locks, atomics, wakeups",
     r"^(_raw_spin_\w+|mutex_\w+|__mutex_\w+|queued_spin_lock_slowpath|"
     r"__wake_up\w*|refcount_\w+|down_read|up_read)$"),
]
_CATEGORY_RES = [(name, re.compile(rx)) for name, rx in PREMIUM_CATEGORIES]


def _category_samples(folded):
    out = {}
    for stack, n in folded.items():
        name = "other"
        for frame in reversed(stack.split(";")[1:]):
            hit = next((c for c, rx in _CATEGORY_RES if rx.search(frame)),
                       None)
            if hit:
                name = hit
                break
        out[name] = out.get(name, 0) + n
    return out


def premium_by_category(target, base):
    """How much of target's extra busy samples over base each category of
    PREMIUM_CATEGORIES holds, for two profiles of the same work (the
    profiled phase of two arms). Counts, not shares: the premium of a
    category is (target - base) / base's busy samples, and its one
    standard deviation, counting samples as Poisson, sqrt(target + base)
    / base. Returns {"total": (target, base, premium, sd), "rows": [...]},
    rows sorted by premium, largest first."""
    t, b = _category_samples(target), _category_samples(base)
    tt, tb = sum(target.values()), sum(base.values())
    if not tb:
        return None

    def row(name, x, y):
        return {"category": name, "target": x, "base": y,
                "premium": (x - y) / tb, "sd": math.sqrt(x + y) / tb}
    rows = [row(c, t.get(c, 0), b.get(c, 0))
            for c in [n for n, _ in PREMIUM_CATEGORIES] + ["other"]]
    rows.sort(key=lambda r: (-r["premium"], r["category"]))
    return {"total": row("all busy samples", tt, tb), "rows": rows}

