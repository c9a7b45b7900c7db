"""End-to-end slide export through the real server: the page's "Download (N)" control hands out files
built on click, and after a fragment reruns alone (Shape flow's Next) it offers the step now shown."""

from __future__ import annotations

import io
import zipfile

import pytest
from PIL import Image

from browser import chromium_page, wait_drawn, wait_idle

pytestmark = pytest.mark.browser
TIMEOUT_MS = 120_000  # a busy 2-core machine


@pytest.fixture
def page(server):
    with chromium_page(1280, 720) as p:
        p.set_default_timeout(TIMEOUT_MS)
        yield p


def open_control(page) -> None:
    button = page.get_by_role("button", name="Download (")
    button.first.evaluate("e => e.scrollIntoView({block: 'center'})")
    button.first.click()
    body = page.locator('[data-testid="stPopoverBody"]')
    body.get_by_role("button", name="charts on this page (zip)").wait_for()  # drawn only once opened


def download(page, label: str) -> tuple[str, bytes]:
    body = page.locator('[data-testid="stPopoverBody"]')  # a dataframe's toolbar has its own "CSV" button
    with page.expect_download(timeout=TIMEOUT_MS) as d:
        body.get_by_role("button", name=label).first.click()
    path = d.value.path()
    return d.value.suggested_filename, open(path, "rb").read()


def test_a_page_zip_and_a_step_drawn_by_a_fragment_download_from_the_real_server(page, server):
    page.goto(f"{server}/masking-lab")  # its first section: the two methods and their difference
    wait_idle(page, timeout=TIMEOUT_MS)
    wait_drawn(page, timeout=TIMEOUT_MS)
    open_control(page)
    name, data = download(page, "charts on this page (zip)")
    assert name == "masking-lab_charts_CausalAttention_T6.zip"
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
        assert len(names) == 3 * 2 and "two_correct_masks_CausalAttention_T6.svg" in names
        with Image.open(io.BytesIO(z.read("two_correct_masks_CausalAttention_T6.png"))) as img:
            assert img.format == "PNG" and img.size[0] > 600  # 2x

    page.goto(f"{server}/shape-flow")
    wait_idle(page, timeout=TIMEOUT_MS)
    wait_drawn(page, timeout=TIMEOUT_MS)
    for step in (2, 3):  # Next reruns only the stepper's fragment
        page.get_by_role("button", name="Next ▶").click()
        page.get_by_text(f"Step {step} of 20").first.wait_for()
        wait_drawn(page, timeout=TIMEOUT_MS)
    open_control(page)
    name, data = download(page, "SVG")  # the first chart offered: the step's tensor
    assert name == "step3_keys_MultiHeadAttention_T6_d_out2_2heads.svg", name
    assert data.startswith(b"<svg") and b"step3 keys" in data
