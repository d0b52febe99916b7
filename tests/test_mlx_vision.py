"""Vision-language models on the MLX engine, through mlx-vlm: a tiny random-weight Qwen2.5-VL built
from mlx-vlm's own classes (tests/tiny_vlms.py), served over HTTP, images sent by the official
`openai` and `anthropic` SDKs. smgpy's greedy tokens must equal mlx-vlm's own `generate` on the same
image and prompt, with image requests batched beside each other and beside text requests."""

from __future__ import annotations

import asyncio
import base64
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import tiny_vlms
from conftest import collect, serve_in_thread

np = pytest.importorskip("numpy")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

PROMPT_TEXT = "Describe this."
MAX_TOKENS = 10


def _need_vlm() -> None:
    why = tiny_vlms.available()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


def _image(seed: int, width: int, height: int) -> Any:
    from PIL import Image

    pixels = (np.random.RandomState(seed).rand(height, width, 3) * 255).astype("uint8")
    return Image.fromarray(pixels)


def _solid(width: int, height: int) -> Any:
    from PIL import Image

    return Image.new("RGB", (width, height), (200, 30, 30))


def _png(img: Any) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _data_url(img: Any) -> str:
    return "data:image/png;base64," + base64.b64encode(_png(img)).decode()


def _image_turn(picture: Any) -> list[dict[str, Any]]:
    """A user turn's content: the picture (a data URL), then PROMPT_TEXT."""
    return [{"type": "image_url", "image_url": {"url": _data_url(picture)}}, {"type": "text", "text": PROMPT_TEXT}]


# Three pictures of different sizes: each expands to a different number of image tokens.
SIZES = [(128, 96), (156, 96), (96, 140)]


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_vlm()
    return tiny_vlms.build_qwen25_vl(tmp_path_factory.mktemp("qwen25vl"))


@pytest.fixture(scope="module")
def reference(vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[list[int]]:
    """mlx-vlm's own greedy tokens for each picture with the chat prompt."""
    import mlx_vlm

    model, processor = mlx_vlm.load(str(vlm_dir))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT_TEXT}]}]
    prompt = processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    out = []
    folder = tmp_path_factory.mktemp("images")
    for seed, (w, h) in enumerate(SIZES):
        path = folder / f"{seed}.png"
        _image(seed, w, h).save(path)
        r = mlx_vlm.generate(model, processor, prompt, image=[str(path)], max_tokens=MAX_TOKENS, temperature=0.0)
        out.append([int(t) for t in r.token_ids])
    return out


@pytest.fixture(scope="module")
def engine(vlm_dir: Path) -> Iterator[Any]:
    """The tiny VLM's engine; conftest's `url` fixture serves it."""
    from smgpy.mlx import MLXEngine

    eng = MLXEngine(str(vlm_dir), model_name="tiny-vlm")
    yield eng
    eng.shutdown()


def test_engine_recognises_a_vlm_directory(engine: Any) -> None:
    assert engine.accepts_images is True
    assert engine.chat_template and "<|image_pad|>" in engine.chat_template


def test_chat_image_tokens_equal_mlx_vlm_generate(url: str, engine: Any, reference: list[list[int]]) -> None:
    """Three image requests and a text request at once (one batch): each image answer is
    mlx-vlm's own, token for token."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="x")

    async def ask(seed: int) -> Any:
        w, h = SIZES[seed]
        return await client.chat.completions.create(
            model="tiny-vlm",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": _data_url(_image(seed, w, h))}},
                        {"type": "text", "text": PROMPT_TEXT},
                    ],
                }
            ],
            max_tokens=MAX_TOKENS,
            temperature=0,
        )

    async def text() -> Any:
        return await client.chat.completions.create(
            model="tiny-vlm", messages=[{"role": "user", "content": "hello"}], max_tokens=MAX_TOKENS, temperature=0
        )

    async def main() -> list[Any]:
        return list(await asyncio.gather(ask(0), ask(1), ask(2), text()))

    answers = asyncio.run(main())
    for seed, r in enumerate(answers[:3]):
        assert r.choices[0].message.content == engine.tokenizer.decode(reference[seed]), seed
        # Images count toward the prompt: far more tokens than the text alone.
        assert r.usage.prompt_tokens > 20
    assert answers[3].usage.prompt_tokens < 20
    # Image rows and text rows decoded in the compiled step (per-row M-RoPE deltas as an input).
    compiled = engine._sched.compiled
    assert compiled is not None and compiled.steps > 0


def _generate(engine: Any, text: str, images: list[str] | None, max_tokens: int = MAX_TOKENS) -> tuple[list[int], Any]:
    obj = SimpleNamespace(
        rid=None,
        text=text,
        input_ids=None,
        image_data=images,
        sampling_params={"temperature": 0, "max_new_tokens": max_tokens},
    )
    return asyncio.run(collect(engine, obj))


def _chat_prompt(turns: list[tuple[str, str]], image_turn: int = 0) -> str:
    text = ""
    for i, (role, content) in enumerate(turns):
        image = "<|vision_start|><|image_pad|><|vision_end|>" if i == image_turn and role == "user" else ""
        text += f"<|im_start|>{role}\n{image}{content}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


def test_engine_tokens_equal_mlx_vlm_and_follow_up_turn_hits_the_prefix_cache(
    engine: Any, reference: list[list[int]]
) -> None:
    img = _data_url(_image(0, *SIZES[0]))
    prompt = _chat_prompt([("user", PROMPT_TEXT)])
    ids, meta = _generate(engine, prompt, [img])
    assert ids == reference[0]
    n_prompt = meta["prompt_tokens"]
    # The next turn: the same picture, the answer, and a question about it. The whole first turn
    # (image tokens included, keyed by the image's hash) comes from the prefix cache.
    answer = engine.tokenizer.decode(ids)
    follow = _chat_prompt([("user", PROMPT_TEXT), ("assistant", answer), ("user", "And the colours?")])
    _, meta2 = _generate(engine, follow, [img])
    assert meta2["cached_tokens"] >= n_prompt - 1
    # Another picture of the same size shares only the text before the image.
    other = _data_url(_image(7, *SIZES[0]))
    _, meta3 = _generate(engine, follow, [other])
    assert meta3["cached_tokens"] < 8


def test_text_request_on_a_vlm_equals_mlx_vlm(engine: Any, vlm_dir: Path) -> None:
    import mlx_vlm

    model, processor = mlx_vlm.load(str(vlm_dir))
    prompt = _chat_prompt([("user", "Tell me a story.")], image_turn=-1)
    ref = mlx_vlm.generate(model, processor, prompt, max_tokens=MAX_TOKENS, temperature=0.0)
    ids, _ = _generate(engine, prompt, None)
    assert ids == [int(t) for t in ref.token_ids]


def test_anthropic_sdk_image_block(url: str, engine: Any, reference: list[list[int]]) -> None:
    client = anthropic.Anthropic(base_url=url, api_key="x")
    w, h = SIZES[1]
    data = base64.b64encode(_png(_image(1, w, h))).decode()
    msg = client.messages.create(
        model="tiny-vlm",
        max_tokens=MAX_TOKENS,
        extra_body={"temperature": 0},
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
                    {"type": "text", "text": PROMPT_TEXT},
                ],
            }
        ],
    )
    assert msg.content[0].text == engine.tokenizer.decode(reference[1])
    assert msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0) > 20


def test_responses_input_image(url: str, engine: Any, reference: list[list[int]]) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="x")
    w, h = SIZES[2]
    r = client.responses.create(
        model="tiny-vlm",
        max_output_tokens=MAX_TOKENS,
        temperature=0,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": _data_url(_image(2, w, h))},
                    {"type": "input_text", "text": PROMPT_TEXT},
                ],
            }
        ],
    )
    assert r.output_text == engine.tokenizer.decode(reference[2])


@pytest.mark.parametrize(
    ("url_of", "needle"),
    [
        (lambda: "data:image/png;base64," + base64.b64encode(b"not a png at all").decode(), "not an image"),
        (lambda: "data:image/png;base64,@@@", "base64"),
        (lambda: _data_url(_solid(2000, 1000)), "pixels"),
        (lambda: "https://example.com/cat.png", "not allowed"),
    ],
    ids=["corrupt", "bad-base64", "oversized", "remote-not-allowed"],
)
def test_bad_images_get_a_400_naming_the_image(url: str, url_of: Any, needle: str, engine: Any) -> None:
    engine.image_policy = type(engine.image_policy)(max_pixels=1_000_000)
    body = {
        "model": "tiny-vlm",
        "max_tokens": 4,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url_of()}}],
            }
        ],
    }
    try:
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    finally:
        engine.image_policy = type(engine.image_policy)()
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert needle in err["message"] and "image 1" in err["message"], err


def test_too_many_images_get_a_400(url: str, engine: Any) -> None:
    engine.image_policy = type(engine.image_policy)(max_images=2)
    img = _data_url(_image(0, 56, 56))
    content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": img}} for _ in range(3)]
    body = {"model": "tiny-vlm", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    try:
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    finally:
        engine.image_policy = type(engine.image_policy)()
    assert r.status_code == 400
    assert "at most 2" in r.json()["error"]["message"]


def test_loading_mlx_vlm_leaves_the_environment_as_it_was(vlm_dir: Path) -> None:
    """Importing mlx-vlm sets TRANSFORMERS_* variables; the adapter restores them (in a fresh process,
    since this one imported mlx-vlm for the reference)."""
    code = (
        "import os, sys; from smgpy.mlx import vlm; before = dict(os.environ); vlm.load(sys.argv[1]); "
        "print(dict(os.environ) == before)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRANSFORMERS_")}
    cmd = [sys.executable, "-c", code, str(vlm_dir)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_gemma3_images_batched_equal_mlx_vlm_generate(tmp_path: Path) -> None:
    """A Gemma 3 model (SigLIP tower, a sliding-window layer the image prompts overflow): two image
    requests and a text request at once, over HTTP, and a next turn; each image answer is
    mlx-vlm's own."""
    _need_vlm()
    _two_turns_equal_mlx_vlm(tiny_vlms.build_gemma3(tmp_path / "gemma3"), 2048, second_image=False)


# Text requests sent beside the image requests: prompts of different lengths, prefilled together.
TEXTS = ("hello there", "Tell me a long story about a robot who learns to paint, in three parts.")


def _two_turns_equal_mlx_vlm(folder: Path, prefill_step_size: int, second_image: bool) -> int:
    """Serve the model in ``folder`` (prefill chunks of ``prefill_step_size`` tokens) and ask two
    image requests and two text requests at once, then a next turn after the first image's (text, or
    with ``second_image`` a second picture): every answer must be ``mlx_vlm.generate``'s on the
    same prompt. Returns the next turn's cached prompt tokens."""
    import mlx_vlm
    from smgpy.mlx import MLXEngine

    model, processor = mlx_vlm.load(str(folder))
    pictures = [_image(seed, 96 + 40 * seed, 96) for seed in range(2)]
    paths = []
    for seed, picture in enumerate(pictures):
        paths.append(str(folder / f"{seed}.png"))
        picture.save(paths[-1])
    first = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT_TEXT}]}
    later = first if second_image else {"role": "user", "content": "And then?"}

    def reference(turns: list[dict[str, Any]], images: list[str]) -> str:
        prompt = processor.tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        r = mlx_vlm.generate(model, processor, prompt, image=images or None, max_tokens=MAX_TOKENS, temperature=0.0)
        return str(engine.tokenizer.decode([int(t) for t in r.token_ids]))

    engine = MLXEngine(str(folder), model_name="tiny", prefill_step_size=prefill_step_size)
    try:
        with serve_in_thread(engine) as base:
            client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="x")

            async def ask(messages: list[dict[str, Any]]) -> Any:
                return await client.chat.completions.create(
                    model="tiny", messages=messages, max_tokens=MAX_TOKENS, temperature=0
                )

            async def main() -> tuple[list[Any], Any]:
                asks = [ask([{"role": "user", "content": _image_turn(p)}]) for p in pictures]
                asks += [ask([{"role": "user", "content": text}]) for text in TEXTS]
                answers = list(await asyncio.gather(*asks))
                follow = [
                    {"role": "user", "content": _image_turn(pictures[0])},
                    {"role": "assistant", "content": answers[0].choices[0].message.content},
                    {"role": "user", "content": _image_turn(pictures[1]) if second_image else later["content"]},
                ]
                return answers, await ask(follow)

            answers, again = asyncio.run(main())
        # The prefix cache's own count of the tokens it saved is what the clients were told.
        told = sum((a.usage.prompt_tokens_details.cached_tokens or 0) for a in [*answers, again])
        assert engine._sched.load_info()["prefix_cache_cached_tokens"] == told
        refs = [reference([first], [path]) for path in paths]
        assert refs[0] != refs[1]  # the picture matters
        refs += [reference([{"role": "user", "content": text}], []) for text in TEXTS]
        assert [a.choices[0].message.content for a in answers] == refs
        turns = [first, {"role": "assistant", "content": refs[0]}, later]
        assert again.choices[0].message.content == reference(turns, paths if second_image else paths[:1])
        return int(again.usage.prompt_tokens_details.cached_tokens)
    finally:
        engine.shutdown()


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen3_5"])
def test_qwen3_vl_and_qwen3_5_images_in_prefill_chunks_equal_mlx_vlm_generate(tmp_path: Path, family: str) -> None:
    """A Qwen3-VL model adds features of its vision tower's inner layers to its first layers at the
    image tokens ("deepstack"); Qwen3.5's language model is a hybrid whose first layer keeps a
    recurrent state and no position. Two image requests and a text request at once, prefilled in
    8-token chunks that cut through the images; each image answer is mlx-vlm's own, and so is a
    follow-up turn that starts from the prefix cache (its image included)."""
    _need_vlm()
    folder = tiny_vlms.build_qwen3_vl(tmp_path / family, family=family)
    assert _two_turns_equal_mlx_vlm(folder, 8, second_image=False) > 0


# Gemma 4's processor builds its (unused here) audio feature extractor with mel filters that warn.
@pytest.mark.filterwarnings("ignore:At least one mel filter has all zero values")
@pytest.mark.parametrize("kind", ["per_layer_inputs", "bidirectional"])
def test_gemma4_images_in_prefill_chunks_equal_mlx_vlm_generate(tmp_path: Path, kind: str) -> None:
    """Gemma 4's two kinds (tests/tiny_vlms.py): the small models' per-layer inputs, whose image
    tokens take the padding id's embedding, and the large models' image tokens that attend to each
    other both ways. Two image requests and a text request at once, prefilled in 4-token chunks;
    then a next turn that adds a second image after the first turn, cached. Each image answer is
    mlx-vlm's own. A next turn of the bidirectional kind is prefilled from the start (its new
    image's mask starts at position 0 in mlx-vlm); the other kind's starts from the cache."""
    _need_vlm()
    bidirectional = kind == "bidirectional"
    folder = tiny_vlms.build_gemma4(
        tmp_path / "gemma4", per_layer_inputs=not bidirectional, bidirectional=bidirectional
    )
    cached = _two_turns_equal_mlx_vlm(folder, 4, second_image=True)
    assert cached == 0 if bidirectional else cached > 0


@pytest.mark.parametrize(
    "family", ["mistral3", "lfm2_vl", "smolvlm", "glm4v", "internvl", "kimi_vl", "llama4", "qwen2_vl"]
)
def test_more_families_equal_mlx_vlm_generate(tmp_path: Path, family: str) -> None:
    """Models whose processor writes one image as several runs of image tokens: Mistral 3's rows
    between ``[IMG_BREAK]`` tokens, LFM2-VL's tiles after their row/column markers and a thumbnail
    (LFM2-VL's language model also keeps a convolution state), SmolVLM's tiles in rows ended by line
    breaks, then the whole picture; GLM-4.1V (M-RoPE, a head its config does not call untied);
    InternVL 3 (tiles and a thumbnail in one run); Kimi-VL (an MLA and MoE language model); Llama 4
    (chunked attention, whose cache drops its front: no prefix of it is trimmed back past that);
    Qwen2-VL (Qwen2.5-VL's elder, without window attention). Image
    and text requests at once, in 8-token chunks, then a next turn adding a second picture: each
    answer is mlx-vlm's own, and the next turn starts from the first turn's cached image."""
    _need_vlm()
    if family == "qwen2_vl":
        folder = tiny_vlms.build_qwen25_vl(tmp_path / family, family=family)
    else:
        folder = getattr(tiny_vlms, f"build_{family}")(tmp_path / family)
    assert _two_turns_equal_mlx_vlm(folder, 8, second_image=True) > 0


def test_phi3_v_images_written_as_negative_ids_equal_mlx_vlm_generate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phi-3.5-vision's processor writes image N's tokens as the id -N: the engine holds them as the
    image token id (the prefix cache keys each by its image), the embedding step gets them as
    written, and prompt lookup never drafts them. Image and text requests at once, in 8-token
    chunks, then a next turn adding a second picture: each answer is mlx-vlm's own."""
    _need_vlm()
    from mlx_vlm.models.phi3_v import vision

    clip = vision.VisionModel.CLIP_VIT_LARGE_PATCH14_336_CONFIG  # see tiny_vlms.build_phi3_v
    monkeypatch.setattr(clip, "num_hidden_layers", 2)
    monkeypatch.setattr(clip, "intermediate_size", 256)
    assert _two_turns_equal_mlx_vlm(tiny_vlms.build_phi3_v(tmp_path / "phi3_v"), 8, second_image=True) > 0


def test_image_keys_follow_images_not_runs_of_image_tokens() -> None:
    """The prefix cache's keys. One image's runs all take its key; with several images, runs
    joined only by special tokens and whitespace are one image when the prompt's text has more
    than that between every two placeholders; else (two placeholders side by side) all image
    tokens take one key made of every image, so no cached prefix is shared past the first image."""
    _need_vlm()
    from smgpy.mlx.vlm import ImagePrompt, VisionModel, image_key

    image, brk, end, space, text = 9, 8, 7, 2, 1
    words = {space: " ", text: "word"}

    class Tokenizer:
        all_special_ids = [brk, end, image]
        added_tokens_decoder: dict[int, Any] = {}

        def decode(self, ids: list[int]) -> str:
            return "".join(words.get(t, "<special>") for t in ids)

        def __call__(self, text: str, add_special_tokens: bool) -> dict[str, list[int]]:
            return {"input_ids": [int(t) for t in text.split()]}

    model = object.__new__(VisionModel)
    model.image_token_id, model._blank = image, {}
    model.processor = SimpleNamespace(tokenizer=Tokenizer())

    def keys(ids: list[int], digests: list[bytes], separated: bool = True) -> list[int]:
        prompt = ImagePrompt(input_ids=ids, keys=list(ids), separated=separated)
        model.key_images(prompt, digests)
        return prompt.keys

    da, db = b"a" * 32, b"b" * 32
    a, b = image_key(da), image_key(db)
    rows = [text, image, image, brk, image, space, image, end]
    assert keys(rows, [da]) == [text, a, a, brk, a, space, a, end]
    assert keys([*rows, text, image, end], [da, db]) == [text, a, a, brk, a, space, a, end, text, b, end]
    adjacent = keys([*rows, image, end], [da, db], separated=False)
    both = adjacent[1]
    assert both not in (a, b) and adjacent == [text, both, both, brk, both, space, both, end, both, end]
    # Runs that pair with no image (a word inside an image): the same single key.
    assert keys([text, image, text, image, text, image], [da, db])[1] == both
    with pytest.raises(ValueError, match="one placeholder per image"):
        keys([text, image, text], [da, db])
    # Image N's tokens written as -N by the processor (Phi-3.5-vision): each run's image is known.
    written = [text, -1, -1, brk, -1, text, -2, end]
    held = [text, image, image, brk, image, text, image, end]
    prompt = ImagePrompt(input_ids=list(held), keys=list(held), separated=False, model_ids=written)
    model.key_images(prompt, [da, db])
    assert prompt.keys == [text, a, a, brk, a, text, b, end]
    # The prompt text: placeholders with a word between them, or only a space and a special token.
    assert model._separated(f"{image} {text} {image}", 2)
    assert not model._separated(f"{image} {space} {brk} {image}", 2)
    assert not model._separated(f"{image} {text}", 2)


@pytest.mark.parametrize("refused", [False, True])
def test_a_request_whose_images_the_vision_tower_fails_on_ends_alone(
    url: str, engine: Any, reference: list[list[int]], monkeypatch: pytest.MonkeyPatch, refused: bool
) -> None:
    """The vision tower failing on one request's images (here: made to fail on any request with two
    images) ends that request with an error: a 503 whose detail is in the server log, or, where the
    engine refuses what the images give the model (``ImagesRefused``), a 400 saying why. An image
    request and a text request sent with it are answered, and nothing waits forever."""
    from smgpy.mlx import vlm

    real = vlm.VisionModel.embed

    def embed(self: Any, prompt: Any) -> Any:
        if prompt.images == 2:
            raise (vlm.ImagesRefused if refused else ValueError)("these images give features the engine cannot carry")
        return real(self, prompt)

    monkeypatch.setattr(vlm.VisionModel, "embed", embed)
    w, h = SIZES[0]
    one = {"type": "image_url", "image_url": {"url": _data_url(_image(0, w, h))}}
    bodies = [
        [one, one, {"type": "text", "text": PROMPT_TEXT}],
        [one, {"type": "text", "text": PROMPT_TEXT}],
        "hello",
    ]

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            return list(
                await asyncio.gather(
                    *[
                        client.post(
                            url + "/v1/chat/completions",
                            json={
                                "model": "tiny-vlm",
                                "messages": [{"role": "user", "content": b}],
                                "max_tokens": MAX_TOKENS,
                                "temperature": 0,
                            },
                        )
                        for b in bodies
                    ]
                )
            )

    failed, image, text = asyncio.run(main())
    if refused:
        assert failed.status_code == 400 and "engine cannot carry" in failed.json()["error"]["message"], failed.text
    else:
        assert failed.status_code == 503 and "cannot carry" not in failed.text, failed.text
    assert image.status_code == 200, image.text
    assert image.json()["choices"][0]["message"]["content"] == engine.tokenizer.decode(reference[0])
    assert text.status_code == 200 and text.json()["choices"][0]["message"]["content"]


def test_a_model_whose_language_model_cross_attends_to_the_image_is_refused_at_load(tmp_path: Path) -> None:
    """Llama 3.2 Vision's language model takes the image as ``cross_attention_states`` in its own
    layers, which the engine's batch does not carry: loading it fails with an error saying so,
    rather than serving images it cannot see and text through layers run without their states."""
    _need_vlm()
    from smgpy.mlx import MLXEngine

    folder = tiny_vlms.build_mllama(tmp_path / "mllama")
    with pytest.raises(ValueError, match="does not serve this model.*cross_attention_states"):
        MLXEngine(str(folder))


def test_processor_outputs_that_are_not_numbers_are_no_model_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek-VL2's processor also returns the prompt it rendered (``sft_format``, text): only
    numeric outputs go on to the model's embedding step (text made it fail, and the request 503)."""
    _need_vlm()
    import mlx_vlm.utils
    from smgpy.mlx.vlm import VisionModel

    out = {
        "input_ids": np.array([[1, 9, 9, 2]]),
        "attention_mask": np.ones((1, 4)),
        "pixel_values": np.zeros((1, 3, 4, 4), dtype=np.float32),
        "images_seq_mask": np.array([[False, True, True, False]]),
        "sft_format": ["<|User|>: <image>"],
        "tiles": [np.zeros((3, 4, 4)), np.zeros((3, 2, 4))],
    }
    monkeypatch.setattr(mlx_vlm.utils, "prepare_inputs", lambda *args, **kwargs: out)
    model = object.__new__(VisionModel)
    model.image_token_id, model._add_special, model.processor = 9, False, SimpleNamespace()
    prompt = model.process("<|User|>: <image>", [_solid(4, 4)])
    assert prompt.input_ids == [1, 9, 9, 2] and set(prompt.pixels) == {"pixel_values", "images_seq_mask", "tiles"}
    assert isinstance(prompt.pixels["tiles"], list) and len(prompt.pixels["tiles"]) == 2


def test_a_prefix_lm_is_refused_at_load() -> None:
    """PaliGemma's language model attends both ways over the whole prompt (mlx-vlm's config sets
    ``use_bidirectional_attention`` whenever it is unset, and runs the prompt in one pass without a
    mask): the engine's chunked causal prefill would answer other tokens, so it refuses the model."""
    _need_vlm()
    from smgpy.mlx.vlm import VisionModel

    for mode in (True, "all"):
        text = SimpleNamespace(use_bidirectional_attention=mode)
        model = SimpleNamespace(config=SimpleNamespace(model_type="paligemma", text_config=text), language_model=None)
        with pytest.raises(ValueError, match="prefix-LM"):
            VisionModel(model, processor=None)


def test_image_features_the_engine_does_not_carry_are_refused() -> None:
    """What an embedding step returns beyond what the language model calls carry (cross-attention
    states, as Llama 3.2 Vision's; positions other than the default ones in a model without
    M-RoPE; embeddings of another length than the prompt) refuses the request instead of answering
    without it."""
    _need_vlm()
    import mlx.core as mx
    from smgpy.mlx.vlm import ImagePrompt, VisionModel

    model = object.__new__(VisionModel)
    model.model, model.mrope = SimpleNamespace(), False
    model._refuse_uncarried(SimpleNamespace(inputs_embeds=mx.zeros((1, 5, 8))), 5)
    model._refuse_uncarried(SimpleNamespace(position_ids=mx.arange(5)[None]), 5)  # the default ones
    with pytest.raises(ValueError, match="cross_attention_states"):
        model._refuse_uncarried(SimpleNamespace(cross_attention_states=mx.zeros((1, 4, 8))), 5)
    with pytest.raises(ValueError, match="positions"):
        model._refuse_uncarried(SimpleNamespace(position_ids=mx.array([[0, 1, 2, 2, 2]])), 5)
    model.mrope = True  # M-RoPE positions are carried
    model._refuse_uncarried(SimpleNamespace(position_ids=mx.zeros((3, 1, 5))), 5)
    # Embeddings of another length than the prompt's (the processor and the model disagree on
    # an image's size in tokens, as mlx-vlm's LLaVA-NeXT can).
    longer = SimpleNamespace(inputs_embeds=mx.zeros((1, 7, 8)))
    model.model = SimpleNamespace(get_input_embeddings=lambda *args, **kwargs: longer)
    with pytest.raises(ValueError, match="7 positions for the processor's 5 prompt tokens"):
        model.embed(ImagePrompt(input_ids=[1, 2, 3, 4, 5], keys=[1, 2, 3, 4, 5]))


def test_file_urls_only_inside_the_allowed_directory(
    url: str, vlm_dir: Path, tmp_path: Path, reference: list[list[int]]
) -> None:
    """file:// image URLs are a 400 by default; with an allowed directory they are read from it,
    and a path out of it (through `..` or a link) is a 400 naming the image."""
    from smgpy.images import ImagePolicy
    from smgpy.mlx import MLXEngine

    allowed = tmp_path / "media"
    allowed.mkdir()
    w, h = SIZES[0]
    (allowed / "pic.png").write_bytes(_png(_image(0, w, h)))
    outside = tmp_path / "secret.png"
    outside.write_bytes(_png(_image(0, w, h)))
    (allowed / "link.png").symlink_to(outside)

    def ask(base: str, image_url: str) -> httpx.Response:
        content = [{"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": PROMPT_TEXT}]
        body = {"max_tokens": MAX_TOKENS, "temperature": 0, "messages": [{"role": "user", "content": content}]}
        return httpx.post(base + "/v1/chat/completions", json=body, timeout=60)

    refused = ask(url, f"file://{allowed / 'pic.png'}")
    assert refused.status_code == 400 and "image" in refused.json()["error"]["message"]

    engine = MLXEngine(str(vlm_dir), image_policy=ImagePolicy(local_path=str(allowed)))
    try:
        with serve_in_thread(engine) as base:
            ok = ask(base, f"file://{allowed / 'pic.png'}")
            assert ok.status_code == 200, ok.text
            assert ok.json()["choices"][0]["message"]["content"] == engine.tokenizer.decode(reference[0])
            for escape in (f"file://{allowed}/../secret.png", f"file://{allowed / 'link.png'}"):
                r = ask(base, escape)
                assert r.status_code == 400, r.text
                assert "outside the directory" in r.json()["error"]["message"]
    finally:
        engine.shutdown()
