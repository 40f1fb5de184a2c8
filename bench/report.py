"""Ratios, targets, JSON, markdown tables, the bar chart and docs/performance.md."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

LIBS = ("hodiff", "hd.jit", "torch", "jax", "autograd", "numpy")
PEERS = ("hd.jit", "torch", "jax", "autograd", "numpy")
LABEL = {
    "hodiff": "hodiff",
    "hd.jit": "hodiff hd.jit",
    "torch": "PyTorch",
    "jax": "JAX (jit)",
    "autograd": "autograd",
    "numpy": "numpy floor",
}
#: (task, what, bound, text): "what" is a peer (hodiff / peer time) or "hvp/grad"
TARGETS = (
    ("W1", "numpy", 1.10, "W1: hodiff / numpy floor <= 1.10"),
    ("W1", "torch", 1.0, "W1: hodiff / torch <= 1.0"),
    ("W2", "hvp/grad", 2.5, "W2: hodiff HVP / hodiff gradient <= 2.5"),
    ("W3", "torch", 1.0, "W3: hodiff / torch <= 1.0"),
    ("W4", "torch", 1.0, "W4: hodiff / torch <= 1.0"),
    ("W4", "autograd", 0.5, "W4: hodiff / autograd <= 0.5"),
    ("W4b", "torch", 1.0, "W4 as torch: hd.grad, then create_graph=False: hodiff / torch <= 1.0"),
    ("W4s", "torch", 0.5, "W4 static graph re-run: hodiff / torch <= 0.5"),
    ("W5a", "torch", 1.0, "W5 Hessian: hodiff / torch <= 1.0"),
    ("W5b", "torch", 1.0, "W5 3rd derivative: hodiff / torch <= 1.0"),
    ("W6a", "torch", 1.0, "W6 gradient: hodiff / torch <= 1.0"),
    ("W6b", "torch", 1.0, "W6 HVP: hodiff / torch <= 1.0"),
    ("W7a", "torch", 1.0, "W7 per-example gradients: hodiff / torch.func <= 1.0"),
    ("W7a", "hvp/grad", 3.0, "W7: hodiff per-example / batch gradient <= 3"),
)
#: (task, peer, bound, text) on the peak resident-set growth of one call (the memory pass)
MEMORY_TARGETS = (("W3", "torch", 1.3, "W3 peak memory: hodiff / torch <= 1.3"),)
NOTES_HEADING = "## Notes"


def _key(row: dict[str, Any]) -> tuple[str, str]:
    return row["task"], row["dtype"]


def _table(result: dict[str, Any]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """``{(task, dtype): {lib: row}}`` in run order."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for row in result["results"]:
        out.setdefault(_key(row), {})[row["lib"]] = row
    return out


def _median(rows: dict[str, dict[str, Any]], lib: str) -> float | None:
    row = rows.get(lib)
    return row.get("median_s") if row and row.get("check_ok") else None


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """hodiff / peer ratios, HVP / gradient ratios and the targets."""
    table = _table(result)
    grad_of = {r["task"]: r for r in result["results"]}
    hvp_pairs = {"W2": "W1", "W6b": "W6a", "W7a": "W7b"}
    ratios, hvp, targets = [], [], []
    for (task, dtype), rows in table.items():
        hd = _median(rows, "hodiff")
        entry: dict[str, Any] = {"task": task, "dtype": dtype}
        for peer in PEERS:
            t = _median(rows, peer)
            if hd is not None and t:
                entry[f"hodiff/{peer}"] = hd / t
        ratios.append(entry)
        if task in hvp_pairs and (hvp_pairs[task], dtype) in table:
            grad_rows = table[(hvp_pairs[task], dtype)]
            h = {"task": task, "grad_task": hvp_pairs[task], "dtype": dtype}
            for lib in LIBS:
                a, b = _median(rows, lib), _median(grad_rows, lib)
                if a is not None and b:
                    h[lib] = a / b
            hvp.append(h)
    del grad_of
    for task, what, bound, text in TARGETS:
        for entry in ratios if what != "hvp/grad" else hvp:
            if entry["task"] != task:
                continue
            value = entry.get("hodiff" if what == "hvp/grad" else f"hodiff/{what}")
            if value is not None:
                targets.append(
                    {
                        "target": text,
                        "dtype": entry["dtype"],
                        "value": value,
                        "bound": bound,
                        "met": value <= bound,
                    }
                )
    for task, peer, bound, text in MEMORY_TARGETS:
        for (t, dtype), rows in table.items():
            a, b = (rows.get(lib, {}).get("peak_rss_bytes") for lib in ("hodiff", peer))
            if t == task and a is not None and b:
                targets.append(
                    {
                        "target": text,
                        "dtype": dtype,
                        "value": a / b,
                        "bound": bound,
                        "met": a / b <= bound,
                    }
                )
    return {"ratios": ratios, "hvp_over_grad": hvp, "targets": targets}


# ---------------------------------------------------------------- markdown
def _ms(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if not row.get("check_ok"):
        return f"wrong ({row['rel_err']:.1e})"
    t = row.get("median_s")
    return "-" if t is None else f"{t * 1e3:.3g}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _mib(row: dict[str, Any] | None) -> str:
    if row is None or "peak_rss_bytes" not in row:
        return "-"
    rss = row.get("peak_rss_bytes")
    text = "?" if rss is None else f"{rss / 2**20:.1f}"
    if "peak_traced_bytes" in row:
        text += f" ({row['peak_traced_bytes'] / 2**20:.1f})"
    return text


def markdown_tables(result: dict[str, Any]) -> str:
    table = _table(result)
    libs = [lib for lib in LIBS if any(lib in rows for rows in table.values())]
    peers = [p for p in libs if p != "hodiff"]
    titles = {r["task"]: r["title"] for r in result["results"]}
    ratio = {(e["task"], e["dtype"]): e for e in result["summary"]["ratios"]}
    # Two tables, not one of times and ratios side by side: a table of 11 columns does not fit
    # the docs' text column.
    lines = [
        "### Median time per call (ms)",
        "",
        "| task | dtype | " + " | ".join(LABEL[lib] for lib in libs) + " |",
        "|---|---|" + "---:|" * len(libs),
    ]
    for (task, dtype), rows in table.items():
        cells = [_ms(rows.get(lib)) for lib in libs]
        lines.append(f"| {task} {titles[task]} | {dtype} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### hodiff's time / each peer's time (< 1: hodiff is faster)",
        "",
        "| task | dtype | " + " | ".join(f"/ {LABEL[p]}" for p in peers) + " |",
        "|---|---|" + "---:|" * len(peers),
    ]
    for task, dtype in table:
        cells = [_x(ratio[(task, dtype)].get(f"hodiff/{p}")) for p in peers]
        lines.append(f"| {task} {titles[task]} | {dtype} | " + " | ".join(cells) + " |")
    hvp = result["summary"]["hvp_over_grad"]
    if hvp:
        lines += [
            "",
            "### HVP time / gradient time (same library, same run)",
            "",
            "| HVP | dtype | " + " | ".join(LABEL[lib] for lib in libs) + " |",
            "|---|---|" + "---:|" * len(libs),
        ]
        for h in hvp:
            cells = [_x(h.get(lib)) for lib in libs]
            lines.append(
                f"| {h['task']} / {h['grad_task']} | {h['dtype']} | " + " | ".join(cells) + " |"
            )
    targets = result["summary"]["targets"]
    if targets:
        lines += [
            "",
            "### Targets: the ratios hodiff is developed to meet",
            "",
            "| target | dtype | measured | met |",
            "|---|---|---:|:---:|",
        ]
        for t in targets:
            lines.append(
                f"| {t['target']} | {t['dtype']} | {t['value']:.2f} | "
                f"{'yes' if t['met'] else '**no**'} |"
            )
    lines += [
        "",
        "### Correctness: largest relative error against hodiff (checked before "
        "timing; float64 bound 1e-10)",
        "",
        "| task | dtype | " + " | ".join(LABEL[p] for p in peers) + " |",
        "|---|---|" + "---:|" * len(peers),
    ]
    for (task, dtype), rows in table.items():
        cells = [f"{rows[p]['rel_err']:.1e}" if p in rows else "-" for p in peers]
        lines.append(f"| {task} | {dtype} | " + " | ".join(cells) + " |")
    if any("peak_rss_bytes" in r for r in result["results"]):
        lines += [
            "",
            "### Peak memory of one call (MiB): resident-set growth; in parentheses "
            "the tracemalloc peak (numpy-based libraries)",
            "",
            "| task | dtype | " + " | ".join(LABEL[lib] for lib in libs) + " |",
            "|---|---|" + "---:|" * len(libs),
        ]
        for (task, dtype), rows in table.items():
            lines.append(
                f"| {task} | {dtype} | " + " | ".join(_mib(rows.get(lib)) for lib in libs) + " |"
            )
    if result.get("errors"):
        lines += ["", "### Errors", ""]
        lines += [f"- {e['group']} {e['dtype']} {e['lib']}: {e['error']}" for e in result["errors"]]
    return "\n".join(lines) + "\n"


def header(result: dict[str, Any]) -> str:
    m, v, th, s = result["machine"], result["versions"], result["threads"], result["settings"]
    blas = th.get("blas")
    if isinstance(blas, list):
        blas = ", ".join(
            f"{b['internal_api']} {b['version'] or ''} {b['num_threads']} thread(s)".replace(
                "  ", " "
            )
            for b in blas
        )
    torch_threads = th.get("torch")
    if isinstance(torch_threads, dict):
        torch_threads = (
            f"intra-op {torch_threads['intra_op']}, inter-op {torch_threads['inter_op']}"
        )
    return (
        "\n".join(
            [
                f"- date: {result['date']}; hodiff {v.get('hodiff', '?')} at "
                f"{v.get('hodiff_commit', '?')}",
                f"- machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, {m['memory_gib']} GiB; "
                f"{m['os']}; Python {m['python']}; load average at start "
                f"{m.get('load_average_at_start')}",
                "- versions: "
                + ", ".join(f"{k} {v[k]}" for k in ("numpy", "torch", "jax", "autograd") if k in v),
                f"- threads: {th['requested']} for every library (process pinned to CPUs "
                f"{th.get('cpu_affinity')}; BLAS: {blas}; torch: {torch_threads}; "
                f"XLA_FLAGS: `{th.get('xla_flags', '')}`)",
                f"- timing: median of {s['repeats']} interleaved rounds after {s['warmup']} "
                f"warm-up calls; each round of a function starts with `gc.collect()` and one "
                f"untimed call, with the garbage collector on while timed; calls shorter than "
                f"{s['min_time'] * 1e3:g} ms are looped within a round; sizes: {s['size']}",
            ]
        )
        + "\n"
    )


def write_all(result: dict[str, Any], out: Path, docs: bool, root: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    stem = "quick" if result["settings"]["quick"] else "latest"
    paths = [out / f"{stem}.json", out / f"{stem}.md"]
    paths[0].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths[1].write_text(
        f"# hodiff benchmark ({stem})\n\n" + header(result) + "\n" + markdown_tables(result)
    )
    png = out / f"{stem}.png"
    if plot(result, png):
        paths.append(png)
    if docs:
        doc_png = root / "docs" / "performance.png"
        if plot(result, doc_png):
            paths.append(doc_png)
        doc_json = root / "docs" / "performance.json"
        doc_json.write_text(paths[0].read_text())
        paths.append(doc_json)
        doc = root / "docs" / "performance.md"
        doc.write_text(performance_md(result, doc, doc_png.exists()))
        paths.append(doc)
    return paths


def plot(result: dict[str, Any], path: Path) -> bool:
    """Grouped bars: each library's time relative to hodiff's, per task and dtype (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    table = _table(result)
    groups = [(k, rows) for k, rows in table.items() if _median(rows, "hodiff")]
    libs = [lib for lib in LIBS if any(_median(rows, lib) for _, rows in groups)]
    if not groups:
        return False
    colors = {
        "hodiff": "#d62728",
        "hd.jit": "#9467bd",
        "torch": "#ee8a2a",
        "jax": "#1f77b4",
        "autograd": "#2ca02c",
        "numpy": "#7f7f7f",
    }
    # Horizontal bars, one row per workload, in a figure as wide as the docs' text column
    # (about 7 inches): read at that width, a wide chart of vertical bars had unreadable text.
    height = 0.8 / len(libs)
    fig, ax = plt.subplots(figsize=(7.0, 0.42 * len(groups) + 1.6))
    for j, lib in enumerate(libs):
        ys, ws = [], []
        for i, (_, rows) in enumerate(groups):
            t, hd = _median(rows, lib), _median(rows, "hodiff")
            if t and hd:
                ys.append(i + (j - (len(libs) - 1) / 2) * height)
                ws.append(t / hd)
        ax.barh(ys, ws, height, label=LABEL[lib], color=colors[lib])
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels([f"{task} {dtype.replace('float', 'f')}" for (task, dtype), _ in groups])
    ax.invert_yaxis()  # W1 on top, as in the tables
    ax.set_xlabel("time / hodiff's time (log; > 1: slower than hodiff)")
    ax.set_title("hodiff vs PyTorch, JAX (jit), autograd, numpy; 1 thread", fontsize=10)
    ax.legend(ncol=min(len(libs), 3), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    ax.grid(axis="x", which="both", alpha=0.3)
    lo = min(min(b.get_width() for b in c) for c in ax.containers if len(c))
    hi = max(max(b.get_width() for b in c) for c in ax.containers if len(c))
    ax.set_xlim(10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi)))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


METHOD = """\
## Workloads
- W1: gradient of a 784-512-512-10 tanh MLP with mean softmax cross-entropy, batch 128,
  w.r.t. all weights and biases.
- W2: Hessian-vector product of the same loss w.r.t. all weights and biases.
- W3: one WGAN-GP critic step: critic 2-256-256-1 with softplus, batch 256; the gradient of
  `mean D(x_f) - mean D(x_r) + 10 mean_n (||d sum D(x_hat) / d x_hat_n|| - 1)^2` w.r.t.
  the critic's weights.
- W4: per-op overhead: `y = x`; 200 times `y = tanh(y) * 1.01 + 0.1` on a size-16 vector;
  the second derivative of `sum(y)` w.r.t. `x`, by hodiff as `hd.grad` then `.backward()`;
  W4b: as PyTorch's script, `hd.grad` then `hd.grad(..., create_graph=False)`; W4s: two
  `hd.grad` recorded once in static mode (`hd.auto_forward(False)`), each call setting `x.d`
  and running `h.forward()`. PyTorch's `autograd.grad` twice is the reference for all three.
- W5a: the full Hessian (100x100) of `sum(logsumexp(A @ x))`, `A` 200x100.
- W5b: the third derivative of `sum(tanh(x)**2)`, `x` of size 1000.
- W6a, W6b: gradient and HVP of a CNN: 3x3 convolution 1->16 channels on 28x28 (no
  padding), tanh, linear to 10, batch 32.
- W7a, W7b: per-example gradients (64 of them) of a 32-64-64-10 tanh MLP with softmax
  cross-entropy, batch 64 (`hd.vmap` of `hd.grad`, `torch.func.vmap(torch.func.grad)`,
  `jax.vmap(jax.grad)`), and one gradient of the summed loss (W7b).
- W7c: the Hessian of every example's loss of the same MLP w.r.t. its input (64 Hessians
  32x32): `hd.vmap(hd.hessian)`, `torch.func.vmap(torch.func.hessian)`,
  `jax.vmap(jax.hessian)`.
- numpy floor: W1 and W2 written by hand in numpy, no autodiff (the backward pass, and
  Pearlmutter's R-operator for the HVP): the least time a numpy-based library can take.

How each library computes them (the idiomatic, fastest public way we know):
- hodiff: gradients by `zero_grad()` + `loss.backward()`; derivatives of derivatives by
  `hd.grad` (recording) and a final `.backward()`; `hd.hvp`, `hd.hessian`. W3's final pass
  is `loss.backward(clear_buffer=True)` (NNabla's training idiom), which frees values as the
  pass goes, as `torch.autograd.grad` does by default (`retain_graph=False`).
- PyTorch (eager): `torch.autograd.grad`, double backward with `create_graph=True`;
  `torch.func.hessian` for W5a; `addmm`, `cross_entropy`, `conv2d`.
- JAX: everything under `jax.jit` (compile time excluded by the warm-up); HVPs as
  `jax.jvp` of `jax.grad`; W4's loop as `lax.fori_loop` (unrolled, its second
  derivative takes minutes to compile).
- HIPS autograd: `grad`, `make_hvp`, `hessian`; it has no convolution, so W6's is a
  sum over the 9 shifted images (`einsum`).

Every library gets the same numpy inputs (fixed seeds). Before timing, every
result is compared with hodiff's: the norm-wise relative error `max|a - b| / max|b|`
must be at most 1e-10 in float64 (1e-4 in float32); a library that fails is not
timed. Memory is measured in a separate process, one call per function, with
glibc's `MALLOC_MMAP_THRESHOLD_=65536` so that every large buffer is mapped and
unmapped per use: "resident-set growth" is the peak of the process's resident
set during the call (`VmHWM` after resetting it) minus the resident set before,
the same measure for every library; the tracemalloc peak in parentheses counts
numpy's and Python's allocations (torch and XLA do not report theirs to it).
Reproduce with `pip install -e '.[bench]'` and `python -m bench --docs`
(`--quick` for a fast run; `--help` for the options).
"""


def performance_md(result: dict[str, Any], path: Path, with_png: bool) -> str:
    notes = ""
    if path.exists():
        old = path.read_text()
        if NOTES_HEADING in old:
            notes = old[old.index(NOTES_HEADING) :]
    parts = [
        "# Performance\n",
        "How fast hodiff computes gradients, Hessian-vector products and higher derivatives "
        "against PyTorch, JAX and HIPS autograd, on the workloads described "
        "[below](#workloads), on one CPU thread; [Notes](#notes) says how to read the numbers "
        "and gives the data-parallel, GPU, Taylor-mode and checkpointing measurements. "
        "Everything above the Notes is written by `python -m bench --docs`.\n",
        "## Machine and settings\n",
        header(result),
        markdown_tables(result).replace("### ", "## "),
    ]
    if with_png:
        parts.append("![time relative to hodiff](performance.png)\n")
    parts.append(METHOD)
    if notes:
        parts.append(notes)
    return "\n".join(parts)
