"""A page resolves its model once (issue 53): the Model view is handed one :class:`models.Handle` (the model, its
facts, label and cache key) made where the section starts, and neither the grid, the next-token table nor any part of
"Does this head matter?" looks the model up again (``models.found_model``, ``models.handle``): one run used to ask
the state layer for the same name once per part and per value."""

from __future__ import annotations

import pytest

from apptest_utils import messages, open_page

SMOL = "SmolLM2-135M-Instruct"
PARTS = ("knock", "compare", "value", "rollout")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # tests/conftest.py


@pytest.fixture
def asked(smollm2, monkeypatch) -> dict[str, list]:
    """Every model lookup from now on, split by whether the Model view was drawing (``inside_*``) or not, and the
    first argument each Model view was given (``given``)."""
    from dashboard.app_pages import model_view
    from dashboard.state import models

    seen: dict[str, list] = {"given": [], "handle": [], "found": [], "inside_handle": [], "inside_found": []}
    drawing = [False]
    handle, found_model, show = getattr(models, "handle", None), models.found_model, model_view.show_model_view

    def counted(kind: str, fn):
        def call(name, *args, **kwargs):
            seen[f"inside_{kind}" if drawing[0] else kind].append(name)
            return fn(name, *args, **kwargs)
        return call

    def shown(h, *args, **kwargs):
        seen["given"].append(h)
        drawing[0] = True
        try:
            return show(h, *args, **kwargs)
        finally:
            drawing[0] = False

    monkeypatch.setattr(models, "handle", counted("handle", handle), raising=False)
    monkeypatch.setattr(models, "found_model", counted("found", found_model))
    monkeypatch.setattr(model_view, "show_model_view", shown)  # Explore's page imports it again each run
    return seen


def no_errors(at) -> None:
    assert not messages(at)["exception"] and not messages(at)["error"], messages(at)


@pytest.mark.parametrize("weights", [SMOL, "random"])  # SmolLM2 chosen, or shown beside the chapter's random weights
def test_the_model_view_is_handed_its_model_once_and_asks_for_it_in_no_part(asked, weights):
    from dashboard.state import models

    at = open_page(sentence="The cat sat on the mat because the cat was tired", model=weights, section="Model view")
    no_errors(at)
    looked = set()  # the lookups of the rest of the page (its sidebar, the layer's run): the same whatever part
    for part in PARTS:
        if part != "knock":  # the first run shows the first part
            for seen in asked.values():
                seen.clear()
            at.radio(key="heads_part").set_value(part).run()
            no_errors(at)
        assert asked["inside_found"] == [] and asked["inside_handle"] == [], (part, asked)
        assert len(asked["given"]) == 1 and isinstance(asked["given"][0], models.Handle), (part, asked["given"])
        assert asked["given"][0].name == SMOL
        # made where the section starts: once for the view (SmolLM2 as the weights: once more for the layer's run)
        assert asked["handle"] == [SMOL] * (2 if weights == SMOL else 1), (part, asked["handle"])
        if part != "knock":
            looked.add(len(asked["found"]))
    assert len(looked) == 1, looked
