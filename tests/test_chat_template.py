"""Python API of chat templates: rendering, errors, model-directory discovery and the normaliser."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smgpy import _native

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_render_basic_and_kwargs() -> None:
    t = _native.ChatTemplate(CHATML + "{{ enable_thinking }}", {"bos_token": "<s>"})
    out = t.render([{"role": "user", "content": "hi"}], enable_thinking=False)
    assert out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nFalse"
    assert t.render([{"role": "user", "content": "hi"}], add_generation_prompt=False).endswith("<|im_end|>\n")
    assert t.source.startswith("{% for m in messages %}")
    assert t.special_tokens == {"bos_token": "<s>"}
    assert t.generation_prompt == "<|im_start|>assistant\n"


def test_strftime_now_is_frozen_with_now() -> None:
    t = _native.ChatTemplate("{{ strftime_now('%B %d, %Y') }}", now=datetime.datetime(2025, 1, 15, 10, 30))
    assert t.render([]) == "January 15, 2025"


def test_source_may_be_a_path(tmp_path: Path) -> None:
    p = tmp_path / "t.jinja"
    p.write_text("X{{ messages|length }}")
    assert _native.ChatTemplate(str(p)).render([{"role": "user", "content": "a"}]) == "X1"


def test_raise_exception_is_a_template_error() -> None:
    t = _native.ChatTemplate("{{ raise_exception('Only user and assistant roles are supported!') }}")
    with pytest.raises(_native.TemplateError, match="Only user and assistant roles are supported!") as info:
        t.render([])
    assert isinstance(info.value, ValueError)


def test_render_failure_is_a_template_error() -> None:
    with pytest.raises(_native.TemplateError):
        _native.ChatTemplate("{{ messages[0].content.x.y }}").render([{"role": "user", "content": "a"}])


def test_syntax_error_has_file_line_reason(tmp_path: Path) -> None:
    p = tmp_path / "broken.jinja"
    p.write_text("ok\n{% if x %}\n{% endfor %}\n")
    with pytest.raises(_native.TemplateSyntaxError) as info:
        _native.ChatTemplate(str(p))
    err = info.value
    assert isinstance(info.value, ValueError)
    assert err.file == str(p)
    assert err.line == 3
    assert err.reason


def test_from_model_dir_order_and_special_tokens(tmp_path: Path) -> None:
    config = {
        "bos_token": {"__type": "AddedToken", "content": "<|b|>"},
        "eos_token": "<|e|>",
        "chat_template": [
            {"name": "default", "template": "D{{ bos_token }}"},
            {"name": "tool_use", "template": "T{{ eos_token }}"},
        ],
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    t = _native.ChatTemplate.from_model_dir(tmp_path)
    assert t.render([]) == "D<|b|>"
    assert t.render([], tools=[]) == "T<|e|>"
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": "J"}))
    assert _native.ChatTemplate.from_model_dir(str(tmp_path)).render([]) == "J"
    (tmp_path / "chat_template.jinja").write_text("F{{ eos_token }}")
    assert _native.ChatTemplate.from_model_dir(tmp_path).render([]) == "F<|e|>"


def test_from_model_dir_without_template(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _native.ChatTemplate.from_model_dir(tmp_path)


def test_transformers_semantics() -> None:
    t = _native.ChatTemplate(
        "{{ tools is defined }}/{{ tools is none }}/"
        "{% for m in messages %}{{ m.content is defined }}|{{ m.reasoning_content }}|{{ m.thinking }}{% endfor %}"
    )
    assert t.render([{"role": "assistant", "content": None, "reasoning": "r"}]) == "True/True/False|r|r"


def test_tojson_numbers_like_python() -> None:
    t = _native.ChatTemplate("{{ messages[0].args | tojson }}")
    args = {"b": 12345678901234, "neg": -0.0, "exp": 1e-07, "f": 1.5, "s": "é", "n": None}
    assert t.render([{"role": "assistant", "args": args}]) == json.dumps(args, ensure_ascii=False)


def test_continue_final_message() -> None:
    t = _native.ChatTemplate(CHATML)
    out = t.render(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}],
        add_generation_prompt=False,
        continue_final_message=True,
    )
    assert out.endswith("<|im_start|>assistant\nSure")


# ---- normaliser, rule by rule ----

QWEN_LIKE = (
    "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}"
    "{% for c in m.tool_calls %}{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}"
)
PLAIN = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def test_rule_string_arguments_become_objects() -> None:
    msgs = [
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    ]
    out = _native.normalize_messages(msgs, _native.ChatTemplate(QWEN_LIKE))
    assert out[0]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    kept = _native.normalize_messages(msgs, _native.ChatTemplate(PLAIN))
    assert kept[0]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    rendered = _native.ChatTemplate(QWEN_LIKE).render(msgs, normalize=True)
    assert rendered == '{"a": 1}'


def test_rule_content_parts_flattened_only_for_string_templates() -> None:
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}
    ]
    assert _native.normalize_messages(msgs, _native.ChatTemplate(PLAIN))[0]["content"] == "a"
    assert isinstance(_native.normalize_messages(msgs, _native.ChatTemplate(QWEN_LIKE))[0]["content"], list)
    assert _native.ChatTemplate(PLAIN).render(msgs, normalize=True) == "a"


def test_rule_tool_call_turns_get_content() -> None:
    msgs = [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]
    assert _native.normalize_messages(msgs, _native.ChatTemplate(PLAIN))[0]["content"] == ""
    assert _native.normalize_messages(msgs)[0]["content"] == ""


def test_rule_flat_tools_are_nested() -> None:
    flat = [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}}]
    assert _native.normalize_tools(flat) == [
        {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    ]


# ---- robustness ----

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "function", "arguments", "type"]), inner, max_size=3
        )
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(messages=st.lists(json_values, max_size=4))
def test_render_never_crashes(messages: list[Any]) -> None:
    t = _native.ChatTemplate(QWEN_LIKE + "{{ messages | tojson }}")
    try:
        t.render(messages, normalize=True)
    except ValueError:
        pass


def test_python_objects_render_as_python_would() -> None:
    # Integers beyond 64 bits stay exact, tuples are lists, None-valued message keys are dropped.
    t = _native.ChatTemplate(
        "{{ messages[0].x | tojson }} {{ messages[0].x }} {{ messages[0].y | tojson }} {{ messages[0].z is defined }}"
    )
    assert (
        t.render([{"role": "user", "x": 2**70, "y": (1, (2, 3)), "z": None}])
        == "1180591620717411303424 1180591620717411303424 [1, [2, 3]] False"
    )


@pytest.mark.parametrize(
    ("template", "placeholder"),
    [
        ("Qwen3.5-4B.jinja", "<|vision_start|><|image_pad|><|vision_end|>"),
        ("google-gemma-4-31B-it.jinja", "<|image|>"),
    ],
)
def test_real_vision_templates_place_every_clients_image_part(template: str, placeholder: str) -> None:
    """OpenAI `image_url` and Responses `input_image` parts reach a vision model's real template in
    transformers' shape (`type: image`), so each places its image placeholder: Gemma's tests nothing else."""
    from conftest import shared_dir

    source = (shared_dir() / "fixtures" / "chat_templates" / template).read_text()
    url = "data:image/png;base64,iVBORw0KGgo="
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "What is in these pictures?"},
                {"type": "input_image", "image_url": url},
            ],
        }
    ]
    rendered = _native.ChatTemplate(source).render(msgs, normalize=True)
    assert rendered.count(placeholder) == 2, rendered
    assert url not in rendered
