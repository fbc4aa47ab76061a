"""`converter ops` says for every IR op how the WebNN backend writes it (issue 9: "`converter ops --json`
gains a per-op `webnn` entry: direct, decomposed or unsupported with the reason")."""

from __future__ import annotations

import json

from click.testing import CliRunner

import cli
from converter.backends.webnn.lowering import LOWERINGS, UNSUPPORTED, load_all
from converter.ir.opdef import registered_op_types

#: ops whose WebNN lowering belongs to other work (control flow, lists, recurrent layers): they may
#: still read "no WebNN lowering yet"
ELSEWHERE = {"cond", "while_loop", "make_list", "list_gather", "list_length", "list_read", "list_scatter",
             "list_write", "lstm", "gru", "rnn"}


def _rows() -> dict[str, dict]:
    r = CliRunner().invoke(cli.main, ["ops", "--json"])
    assert r.exit_code == 0, r.output
    return {row["op"]: row for row in json.loads(r.output)}


def test_every_registered_op_has_a_webnn_status_and_unsupported_ones_a_reason() -> None:
    rows = _rows()
    for op in registered_op_types():
        entry = rows[op]["webnn"]
        assert entry["status"] in ("direct", "decomposed", "unsupported"), (op, entry)
        if entry["status"] == "unsupported":
            assert entry.get("reason"), op
            if op not in ELSEWHERE:
                assert "no WebNN lowering yet" not in entry["reason"], op


def test_every_op_outside_other_work_is_lowered_or_refused_with_its_own_reason() -> None:
    load_all()
    missing = [t for t in registered_op_types()
               if t not in LOWERINGS and t not in UNSUPPORTED and t not in ELSEWHERE | {"const", "classify"}]
    assert missing == []


def test_statuses_match_the_lowering_table() -> None:
    rows = _rows()
    assert rows["resize_bilinear"]["webnn"]["status"] == "decomposed"
    assert rows["conv"]["webnn"]["status"] == "direct"
    assert rows["crop_resize"]["webnn"]["status"] == "unsupported"
    assert "grid" in rows["resample"]["webnn"]["reason"]
    assert rows["topk"]["webnn"]["note"].startswith("k = 1")


def test_ops_text_has_a_webnn_column() -> None:
    r = CliRunner().invoke(cli.main, ["ops"])
    assert r.exit_code == 0
    line = next(x for x in r.output.splitlines() if x.startswith("resize_bilinear "))
    assert "webnn: decomposed " in line and "neuralnetwork: " in line
