"""A function's dataflow graph, drawn: ``converter inspect --graph out.dot|out.svg|out.html``.

Nodes are the function's inputs, its ops other than ``const`` (nested blocks included: a nested
block's ops sit in a cluster named after the op that owns the block, and the block's results flow
into that op) and its outputs; edges are the values between them (constants are left out, so a
large model stays readable). DOT is written as text (no dependency); SVG and HTML are drawn by
Graphviz when the ``graphviz`` Python package and its ``dot`` program are installed, else by a
simple layered layout here (longest-path layers, one barycentre sweep, straight curves), bounded
by `MAX_DRAWN_NODES`. The HTML page is static and self-contained (inline SVG, no script, nothing
fetched).
"""

from __future__ import annotations

import html
from collections import defaultdict, deque
from dataclasses import dataclass, field

from .errors import UnsupportedError
from .errors import printable as _printable
from .ir.census import CONST_OP_TYPES
from .ir.core import Block, Function, Value
from .ir.text import format_type

#: SVG and HTML drawn here stop at this many nodes (DOT has no limit: it is linear text).
MAX_DRAWN_NODES = 20_000
GRAPH_FORMATS = (".dot", ".svg", ".html")

_W, _H, _GAP_X, _GAP_Y, _MARGIN = 170, 34, 16, 46, 20
_LABEL_CHARS = 24


@dataclass
class Node:
    id: str
    kind: str  # "input", "op", "output"
    label: str  # the op type or the feature name
    title: str  # longer text: name and types (a tooltip)
    cluster: str | None = None  # the innermost nested block holding the op


@dataclass
class Cluster:
    id: str
    label: str
    parent: str | None


@dataclass
class Graph:
    name: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, value name)
    clusters: dict[str, Cluster] = field(default_factory=dict)


def _values(arg: object) -> list[Value]:
    if isinstance(arg, Value):
        return [arg]
    if isinstance(arg, (tuple, list)):
        return [v for v in arg if isinstance(v, Value)]
    return []


def dataflow_graph(fn: Function) -> Graph:
    """The graph of ``fn`` (see the module docstring); linear in the size of the function."""
    g = Graph(fn.name)
    node_of: dict[int, str] = {}  # id(value) -> the node producing it
    for i, v in enumerate(fn.inputs):
        g.nodes.append(Node(f"in_{i}", "input", v.name, f"input {v.name}: {format_type(v.type)}"))
        node_of[id(v)] = f"in_{i}"
    counter = 0

    def visit(block: Block, cluster: str | None) -> None:
        nonlocal counter
        for op in block.ops:
            if op.type in CONST_OP_TYPES:
                continue
            nid = f"op_{counter}"
            counter += 1
            outs = ", ".join(f"{v.name}: {format_type(v.type)}" for v in op.outputs)
            g.nodes.append(Node(nid, "op", op.type, f"{op.type} {op.name} -> {outs}", cluster))
            for arg in op.inputs.values():
                for v in _values(arg):
                    src = node_of.get(id(v))
                    if src is not None:
                        g.edges.append((src, nid, v.name))
            for k, b in enumerate(op.blocks):
                cid = f"cluster_{nid}_{k}"
                g.clusters[cid] = Cluster(cid, f"{op.type} {op.name}: block {k}", cluster)
                visit(b, cid)
                for v in b.outputs:  # a block's results flow into the op that owns it
                    src = node_of.get(id(v))
                    if src is not None:
                        g.edges.append((src, nid, v.name))
            for v in op.outputs:
                node_of[id(v)] = nid

    visit(fn.block, None)
    for i, v in enumerate(fn.outputs):
        g.nodes.append(Node(f"out_{i}", "output", v.name, f"output {v.name}: {format_type(v.type)}"))
        src = node_of.get(id(v))
        if src is not None:
            g.edges.append((src, f"out_{i}", v.name))
    return g


def op_node_count(g: Graph) -> int:
    return sum(1 for n in g.nodes if n.kind == "op")


# ---------------------------------------------------------------------------------------------
# DOT


def _dot_string(s: str) -> str:
    s = _printable(s).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


_DOT_STYLE = {"input": 'shape=ellipse, fillcolor="#d8ecd8"', "output": 'shape=ellipse, fillcolor="#f3dcc4"',
              "op": 'shape=box, fillcolor="#dde6f5"'}


def to_dot(g: Graph) -> str:
    """The graph in Graphviz's DOT language: one statement per node and per edge."""
    lines = [f"digraph {_dot_string(g.name)} {{", "  rankdir=TB;",
             '  node [style="rounded,filled", fontname="Helvetica", fontsize=11];',
             '  edge [fontname="Helvetica", fontsize=9, color="#555555"];']
    members: dict[str | None, list[Node]] = defaultdict(list)
    for n in g.nodes:
        members[n.cluster].append(n)
    children: dict[str | None, list[Cluster]] = defaultdict(list)
    for c in g.clusters.values():
        children[c.parent].append(c)

    def emit(cluster: str | None, indent: str) -> None:
        for n in members[cluster]:
            lines.append(f"{indent}{n.id} [label={_dot_string(n.label)}, tooltip={_dot_string(n.title)}, "
                         f"{_DOT_STYLE[n.kind]}];")
        for c in children[cluster]:
            lines.append(f"{indent}subgraph {c.id} {{")
            lines.append(f'{indent}  label={_dot_string(c.label)}; style="dashed";')
            emit(c.id, indent + "  ")
            lines.append(f"{indent}}}")

    emit(None, "  ")
    for a, b, name in g.edges:
        lines.append(f"  {a} -> {b} [tooltip={_dot_string(name)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# A layered layout, for SVG without Graphviz


def layout(g: Graph) -> dict[str, tuple[float, float]]:
    """Top-left corner of each node: layer = longest path from a source (an op without inputs drawn
    just above its first user), order within a layer by
    the mean position of the node's predecessors (one sweep). O(nodes + edges) plus a sort per layer."""
    preds: dict[str, list[str]] = defaultdict(list)
    succs: dict[str, list[str]] = defaultdict(list)
    for a, b, _ in g.edges:
        preds[b].append(a)
        succs[a].append(b)
    indegree = {n.id: len(preds[n.id]) for n in g.nodes}
    rank = dict.fromkeys(indegree, 0)
    queue = deque(n for n, d in indegree.items() if d == 0)
    while queue:
        n = queue.popleft()
        for s in succs[n]:
            rank[s] = max(rank[s], rank[n] + 1)
            indegree[s] -= 1
            if indegree[s] == 0:
                queue.append(s)
    for n in g.nodes:  # an op with no inputs drawn (a constexpr op) sits just above its first user
        if n.kind == "op" and not preds[n.id] and succs[n.id]:
            rank[n.id] = max(0, min(rank[s] for s in succs[n.id]) - 1)
    last = max(rank.values(), default=0)
    for n in g.nodes:  # outputs at the bottom
        if n.kind == "output":
            rank[n.id] = last
    layers: dict[int, list[str]] = defaultdict(list)
    for n in g.nodes:
        layers[rank[n.id]].append(n.id)
    slot: dict[str, float] = {}
    for r in sorted(layers):
        row = layers[r]
        row.sort(key=lambda n: _barycentre(preds[n], slot))
        for i, n in enumerate(row):
            slot[n] = float(i)
    width = max((len(row) for row in layers.values()), default=1)
    pos = {}
    for r, row in layers.items():
        offset = (width - len(row)) * (_W + _GAP_X) / 2  # centre each layer
        for i, n in enumerate(row):
            pos[n] = (_MARGIN + offset + i * (_W + _GAP_X), _MARGIN + r * (_H + _GAP_Y))
    return pos


def _barycentre(preds: list[str], slot: dict[str, float]) -> float:
    placed = [slot[p] for p in preds if p in slot]
    return sum(placed) / len(placed) if placed else float("inf")


_SVG_FILL = {"input": "#d8ecd8", "output": "#f3dcc4", "op": "#dde6f5"}


def _short(s: str) -> str:
    s = _printable(s)
    return s if len(s) <= _LABEL_CHARS else s[: _LABEL_CHARS - 1] + "\u2026"


def to_svg(g: Graph) -> str:
    """A standalone SVG drawing (see `layout`); `UnsupportedError` above `MAX_DRAWN_NODES`."""
    if len(g.nodes) > MAX_DRAWN_NODES:
        raise UnsupportedError(f"the graph has {len(g.nodes)} nodes, more than the {MAX_DRAWN_NODES} drawn here: "
                               "write --graph OUT.dot and draw it with Graphviz (pip install graphviz, and its "
                               "dot program)")
    pos = layout(g)
    width = max((x for x, _ in pos.values()), default=0) + _W + _MARGIN
    height = max((y for _, y in pos.values()), default=0) + _H + _MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f"<title>{html.escape(_printable(g.name))}</title>",
           '<g fill="none" stroke="#777" stroke-width="1">']
    for a, b, name in g.edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        x1, y1, x2, y2 = x1 + _W / 2, y1 + _H, x2 + _W / 2, y2
        my = (y1 + y2) / 2
        out.append(f'<path d="M{x1:.0f},{y1:.0f} C{x1:.0f},{my:.0f} {x2:.0f},{my:.0f} {x2:.0f},{y2:.0f}">'
                   f"<title>{html.escape(_printable(name))}</title></path>")
    out.append("</g>")
    for n in g.nodes:
        x, y = pos[n.id]
        rx = _H / 2 if n.kind != "op" else 6
        dash = ' stroke-dasharray="4,2"' if n.cluster else ""
        out.append(f'<g><title>{html.escape(_printable(n.title))}</title>'
                   f'<rect x="{x:.0f}" y="{y:.0f}" width="{_W}" height="{_H}" rx="{rx:.0f}" '
                   f'fill="{_SVG_FILL[n.kind]}" stroke="#333"{dash}/>'
                   f'<text x="{x + _W / 2:.0f}" y="{y + _H / 2 + 4:.0f}" text-anchor="middle">'
                   f"{html.escape(_short(n.label))}</text></g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _graphviz_svg(dot: str) -> str | None:
    """SVG drawn by Graphviz, or None when the graphviz package or its dot program is missing."""
    try:
        import graphviz  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        data = graphviz.Source(dot).pipe(format="svg")
    except Exception:  # noqa: BLE001 - ExecutableNotFound, a failing dot: draw it ourselves
        return None
    text = data.decode("utf-8") if isinstance(data, bytes) else str(data)
    start = text.find("<svg")  # drop the XML prologue and doctype: the SVG is embedded in HTML too
    return text[start:] if start >= 0 else None


def svg(g: Graph) -> str:
    """The drawing: Graphviz's when available, else `to_svg`'s."""
    return _graphviz_svg(to_dot(g)) or to_svg(g)


def to_html(g: Graph, *, title: str, summary: str) -> str:
    """A static page: the model summary, then the drawing inline (or, for a graph too large to
    draw here, a line saying so: the report is still worth the page)."""
    try:
        drawing = svg(g)
    except UnsupportedError as e:
        drawing = f"<p>Not drawn: {html.escape(e.message)}.</p>\n"
    t = html.escape(_printable(title))
    summary = "\n".join(_printable(line) for line in summary.splitlines())
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{t}</title>\n"
            "<style>body{font-family:Helvetica,Arial,sans-serif;margin:1em}pre{background:#f6f6f6;padding:.8em;"
            "overflow:auto}.graph{overflow:auto;border:1px solid #ccc}</style>\n</head>\n<body>\n"
            f"<h1>{t}</h1>\n<pre>{html.escape(summary)}</pre>\n"
            f"<p>Dataflow of function {html.escape(_printable(g.name))}: {op_node_count(g)} ops (constants "
            "left out); hover a node or an edge for its name and type.</p>\n"
            f"<div class=\"graph\">\n{drawing}</div>\n</body>\n</html>\n")


def render(g: Graph, suffix: str, *, title: str = "", summary: str = "") -> str:
    """The file's text for ``suffix`` (one of `GRAPH_FORMATS`)."""
    suffix = suffix.lower()
    if suffix == ".dot":
        return to_dot(g)
    if suffix == ".svg":
        return svg(g)
    if suffix == ".html":
        return to_html(g, title=title or g.name, summary=summary)
    raise UnsupportedError(f"--graph writes {', '.join(GRAPH_FORMATS)} files, not '{suffix or 'no extension'}'")
