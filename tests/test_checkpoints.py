"""The shipped trained models: intact, loadable, and reproducible from their recipe."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_core.labs import checkpoints
from attn_core.labs.learn import TASKS, Trainer, get_task

SHIPPED = checkpoints.manifest()


def test_every_task_has_a_shipped_model_of_a_few_hundred_kb():
    assert set(SHIPPED) == set(TASKS)
    total = sum(checkpoints.checkpoint_path(t).stat().st_size for t in TASKS)
    assert total < 5e6


@pytest.mark.parametrize("name", list(TASKS))
def test_shipped_model_loads_and_reproduces_its_recorded_scores(name):
    entry = SHIPPED[name]
    path = checkpoints.checkpoint_path(name)
    assert checkpoints.sha256(path) == entry["sha256"]
    tr = checkpoints.load(name)
    assert tr.done and tr.step_count == entry["steps"] and len(tr.losses) == entry["steps"]
    recomputed = checkpoints.final_scores(tr)  # from the loaded weights on the probe input
    for score, values in entry["final_scores"].items():
        np.testing.assert_allclose(checkpoints.as_array(recomputed[score]), checkpoints.as_array(values),
                                   atol=1e-4, err_msg=f"{name}: {score}")
    assert entry["goals_met"] and tr.goals_met()
    # the last snapshot (float16 in the file) shows the same attention as the loaded weights
    final = tr.snapshots[-1]
    assert final.step == entry["steps"]
    from attn_core.labs.learn import probe_attention
    np.testing.assert_allclose(final.weights, probe_attention(tr.model, tr.probe_idx), atol=2.5e-3)  # stored in 8 bits


def test_a_short_rerun_of_the_recipe_matches_the_shipped_losses():
    """Training is deterministic for a seed: 25 steps of the shipped recipe give the shipped losses."""
    shipped = checkpoints.load("induction")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tr = Trainer(get_task("induction"), seed=SHIPPED["induction"]["seed"], steps=25)
        tr.run()
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(tr.losses, shipped.losses[:25], rtol=1e-4)
    assert tr.losses != shipped.losses[1:26]  # not trivially equal: the loss changes step to step


def test_loading_a_missing_model_says_what_to_run(tmp_path):
    with pytest.raises(ValueError, match="python -m attn_core.labs.checkpoints"):
        checkpoints.load("induction", tmp_path / "nope.pt")


def test_run_trained_on_a_sentence_maps_tokens_to_symbols_and_traces_every_layer():
    from attn_core.models.traced import layer_trace
    from attn_core.text.tokens import tokenize
    from attn_core.tracing.views import all_heads

    ids = [t.id for t in tokenize("the cat sat on the mat. the cat sat on the mat.")]
    trace, symbols = checkpoints.run_trained("induction", ids)
    assert symbols[:4] == [0, 1, 2, 3] and len(set(symbols)) == len(set(ids))
    assert all((ids[i] == ids[j]) == (symbols[i] == symbols[j]) for i in range(len(ids)) for j in range(len(ids)))
    weights = np.stack([all_heads(layer_trace(trace, i), "weights") for i in range(2)])
    assert weights.shape == (2, 4, len(ids), len(ids))
    from attn_core.labs.scores import head_scores
    scores = head_scores(weights, symbols)
    assert np.nanmax(scores["induction"][1]) > 0.4  # the trained induction heads work on a repeated sentence
    with pytest.raises(ValueError, match="context_length"):
        checkpoints.run_trained("induction", list(range(49)))
    with pytest.raises(ValueError, match="only 64 symbols"):
        checkpoints.to_symbols(list(range(65)), 64)
