import pytest

from app.errors import NotFoundError, UsageError
from app.models.selection import RemoteFile, available_quants, quant_of, select_by_glob, select_by_quant

REPO = "org/Model-GGUF"


def files(*paths: str, size: int = 10) -> list[RemoteFile]:
    return [RemoteFile(REPO, p, size, "0" * 64, "c" * 40) for p in paths]


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Qwen3-8B-Q4_K_M.gguf", "Q4_K_M"),
        ("Qwen3.8-27B-UD-Q4_K_M.gguf", "UD-Q4_K_M"),
        ("qwen3-8b-q8_0.gguf", "Q8_0"),
        ("Q6_K/Model-Q6_K-00001-of-00002.gguf", "Q6_K"),
        ("Model-IQ4_XS.gguf", "IQ4_XS"),
        ("Qwen3.8-27B-DSpine-b16-BF16.gguf", "BF16"),
        ("model.gguf", None),
    ],
)
def test_quant_of(name, quant):
    assert quant_of(name) == quant


def test_plain_name_wins_over_variants_and_projectors_are_skipped():
    listing = files("M-UD-Q4_K_M.gguf", "M-Q4_K_M.gguf", "mmproj-M-Q4_K_M.gguf", "M-Q8_0.gguf")
    assert [f.path for f in select_by_quant(REPO, listing, "q4_k_m")] == ["M-Q4_K_M.gguf"]
    assert [f.path for f in select_by_glob(REPO, listing, "*Q4_K_M*.gguf")] == ["M-Q4_K_M.gguf"]
    assert [f.path for f in select_by_quant(REPO, listing, "UD-Q4_K_M")] == ["M-UD-Q4_K_M.gguf"]


def test_quant_prefix_does_not_match_a_longer_quant():
    listing = files("M-Q4_K_M.gguf", "M-Q4_K_S.gguf")
    with pytest.raises(NotFoundError) as caught:
        select_by_quant(REPO, listing, "Q4_K")
    assert "Q4_K_M, Q4_K_S" in caught.value.fix


def test_split_gguf_returns_every_shard_in_order():
    listing = files("Q8_0/M-Q8_0-00002-of-00002.gguf", "Q8_0/M-Q8_0-00001-of-00002.gguf", "M-Q4_K_M.gguf")
    chosen = select_by_quant(REPO, listing, "Q8_0")
    assert [f.path for f in chosen] == ["Q8_0/M-Q8_0-00001-of-00002.gguf", "Q8_0/M-Q8_0-00002-of-00002.gguf"]


def test_incomplete_split_is_refused():
    with pytest.raises(NotFoundError, match="split into 3 files"):
        select_by_quant(REPO, files("M-Q8_0-00001-of-00003.gguf", "M-Q8_0-00002-of-00003.gguf"), "Q8_0")


def test_default_quant_prefers_q4_k_m_then_the_only_model():
    assert select_by_quant(REPO, files("M-Q8_0.gguf", "M-Q4_K_M.gguf"), None)[0].path == "M-Q4_K_M.gguf"
    assert select_by_quant(REPO, files("M-F16.gguf", "README.md"), None)[0].path == "M-F16.gguf"
    with pytest.raises(UsageError, match="several models"):
        select_by_quant(REPO, files("M-F16.gguf", "M-BF16.gguf"), None)


def test_no_gguf_at_all_lists_the_files():
    with pytest.raises(NotFoundError) as caught:
        select_by_glob(REPO, files("model.safetensors", "config.json"), "*.gguf")
    assert "no GGUF files" in caught.value.fix and "model.safetensors" in caught.value.fix


def test_available_quants():
    assert available_quants(files("a-Q4_K_M.gguf", "a-Q8_0.gguf", "mmproj-F16.gguf", "x.md")) == ["Q4_K_M", "Q8_0"]
