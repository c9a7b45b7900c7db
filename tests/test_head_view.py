"""The line view of one head: lines only where attention goes, opacity = weight, hover isolates."""

import json

import altair as alt
import numpy as np
import torch

from attn_core import BOOK_INPUTS, CausalAttention, Trace
from dashboard.drawing.head_view import line_frame, line_view


def book_weights() -> np.ndarray:
    torch.manual_seed(123)
    trace = Trace()
    CausalAttention(3, 2, 6, 0.0)(BOOK_INPUTS.unsqueeze(0), trace)
    return trace["attn_weights"].tensor[0].numpy()


def test_masked_pairs_get_no_line_and_weights_are_the_opacity():
    w = book_weights()
    labels = [f"{i + 1}: t" for i in range(6)]
    f = line_frame(w, labels)
    assert len(f) == 21  # 6 * 7 / 2 visible pairs of a causal 6x6
    assert (f["k"] <= f["q"]).all()  # no line to a future key
    got = {(r.q, r.k): r.weight for r in f.itertuples()}
    np.testing.assert_allclose([got[(i, j)] for i in range(6) for j in range(i + 1)],
                               [w[i, j] for i in range(6) for j in range(i + 1)])
    assert set(f["query"]) == set(labels)


def test_negative_infinity_and_tiny_weights_are_skipped():
    w = np.array([[1.0, -np.inf], [0.0004, 0.9996]])
    f = line_frame(w, ["a", "b"])
    assert [(r.q, r.k) for r in f.itertuples()] == [(0, 0), (1, 1)]


def test_spec_has_hover_isolation_and_fixed_size():
    alt.data_transformers.disable_max_rows()
    spec = line_view(book_weights(), [f"{i + 1}: t" for i in range(6)], width=300).to_dict()
    params = json.dumps(spec)
    assert '"hq"' in params and '"hk"' in params and "pointerover" in params
    rule = spec["layer"][0]
    assert rule["mark"]["type"] == "rule"
    assert rule["encoding"]["opacity"]["condition"]["field"] == "weight"
    assert rule["encoding"]["opacity"]["value"] == 0.02
    assert spec["width"] == 300 and spec["height"] >= 6 * 30


def test_window_offsets_place_tokens_at_their_positions():
    w = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    f = line_frame(w, [str(i) for i in range(10)], offset=6)
    assert f["q"].min() == 6 and f["q"].max() == 9 and f.loc[0, "query"] == "6"


def test_explore_draws_the_line_view_of_the_chosen_head_and_offers_slides():
    from apptest_utils import clear_caches, messages, new_app, specs

    clear_caches()
    at = new_app(variant="MultiHeadAttention", num_heads="2", line_view="true")
    at.run()
    assert not messages(at)["exception"], messages(at)
    line = [s for s in specs(at) if '"hq"' in json.dumps(s)]
    assert len(line) == 1
    rows = next(iter(line[0]["datasets"].values())) if "datasets" in line[0] else None
    assert rows is None or all(r["k"] <= r["q"] for r in rows)  # no line to a future key
    # the weights chart is offered with the page's other charts (built only when a download is clicked)
    assert [p.proto.popover.label for p in at.get("popover")] == ["Download (2)", "Ask the class"]  # heatmap, line view
    clear_caches()
